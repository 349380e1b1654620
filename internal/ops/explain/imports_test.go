package explain

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

func testImport(clusters ...string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", UID: "uid-1", Generation: 1},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.1.1"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	for _, c := range clusters {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	ready := importplan.ReadyCondition(importplan.Readiness{Type: si.Spec.Type, IPs: si.Spec.IPs, LiveClusters: len(clusters)}, 1)
	si.Status.Conditions = []metav1.Condition{ready}
	return si
}

// testDerived is the derived Service the controller keeps for si, carrying annotation.
func testDerived(si *mcsv1beta1.ServiceImport, annotation string) *corev1.Service {
	svc := importplan.DerivedService(si.Namespace, si.Name, si.Spec, importplan.FamilyAttempts(nil)[0])
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.1.1", []string{"10.96.1.1"}
	if annotation != "" {
		svc.Annotations = map[string]string{allocation.Annotation: annotation}
	}
	return svc
}

// readySlice is one imported slice from cluster with ready endpoints in zone.
func readySlice(cluster, zone string, ready int) *discoveryv1.EndpointSlice {
	s := builders.MakeImportedSlice("shop", names.ImportedName("cart", cluster, "cart-1"), "cart", cluster)
	for i := range ready {
		s.Endpoints(builders.MakeEndpoint(fmt.Sprintf("10.%d.0.%d", len(cluster), i+1)).Ready().Zone(zone).Obj())
	}
	return s.Obj()
}

func preferSameCluster() *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart",
		Annotations: map[string]string{v1alpha1.AnnotationTrafficDistribution: v1alpha1.PreferSameCluster}}}
}

func cpu(cluster string, milli int64) MemberCPU {
	return MemberCPU{Cluster: cluster, CPU: locality.NodeCPU{MilliCPU: milli}, HasCPU: true, Source: "test"}
}

func TestExplainImport(t *testing.T) {
	si := testImport("east", "west")
	slices := []*discoveryv1.EndpointSlice{readySlice("east", "a", 3), readySlice("west", "b", 1)}
	members := []MemberCPU{cpu("east", 8000), cpu("west", 8000)}
	// What the controller publishes for these inputs: west, with one endpoint for half the
	// demand, must send most of its traffic to east.
	spill := locality.Decide([]locality.Member{
		{Name: "east", CPU: locality.NodeCPU{MilliCPU: 8000}, HasCPU: true, Ready: locality.CountReady(slices[:1])},
		{Name: "west", CPU: locality.NodeCPU{MilliCPU: 8000}, HasCPU: true, Ready: locality.CountReady(slices[1:])},
	}, "", false, locality.DefaultOptions()).Annotation

	cases := []struct {
		name    string
		in      ImportInputs
		want    []string
		matches bool
	}{{
		name: "the published spill matches",
		in: ImportInputs{Self: "east", Import: si, Derived: testDerived(si, spill), Slices: slices, Export: preferSameCluster(),
			Members: members, Settings: DefaultSettings()},
		want: []string{"preference: PreferSameCluster, from this member's ServiceExport", "allocation: Spill",
			"west     62.5%   37.5% to east  1.25x", "east     8000m       yes      1                3", "MATCHES"},
		matches: true,
	}, {
		name: "a stale allocation differs",
		in: ImportInputs{Self: "east", Import: si, Derived: testDerived(si, `{"mode":"Local","clusters":[]}`), Slices: slices,
			Export: preferSameCluster(), Members: members, Settings: DefaultSettings()},
		want: []string{"the derived Service's fleetslice.io/cluster-allocation annotation is {\"mode\":\"Local\""},
	}, {
		name:    "no preference publishes nothing",
		in:      ImportInputs{Self: "east", Import: si, Derived: testDerived(si, ""), Slices: slices, Members: members, Settings: DefaultSettings()},
		want:    []string{"allocation: none: the exports do not ask for fleetslice.io/traffic-distribution=PreferSameCluster", "MATCHES"},
		matches: true,
	}, {
		name: "unknown CPU is said, and the missing derived Service too",
		in:   ImportInputs{Self: "east", Import: si, Slices: slices, Export: preferSameCluster(), Members: members[:1], Settings: DefaultSettings()},
		want: []string{"cluster west's CPU is unknown here", "the ClusterSetIP import has no derived Service",
			"Ready is True (Ready): Imported from 2 cluster(s), the inputs give False (Pending)"},
	}, {
		name: "slices of a cluster that is no longer live",
		in: ImportInputs{Self: "east", Import: testImport("east"), Derived: testDerived(testImport("east"), ""), Slices: slices,
			Members: members, Settings: DefaultSettings()},
		want: []string{"1 imported slices from west, which is not a live exporter", "west     8000m       no       0"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := ExplainImport(tc.in)
			var out strings.Builder
			if err := rep.Render(&out); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if got := len(rep.Differences) == 0; got != tc.matches {
				t.Errorf("matches = %v, want %v; differences %q", got, tc.matches, rep.Differences)
			}
		})
	}
}

// An import with cluster selectors: explain re-runs the tiered allocation from the members'
// published properties when it reads the broker, and says it cannot without.
func TestExplainImportWithClusterSelectors(t *testing.T) {
	const regionOnly = `[{"propertySelector":{"matchProperties":{"region.topology.k8s.io":"@SameAsImporter@"}}}]`
	si := testImport("east", "west", "north")
	si.Annotations = map[string]string{v1alpha1.AnnotationClusterSelectors: regionOnly}
	slices := []*discoveryv1.EndpointSlice{readySlice("east", "a", 1), readySlice("west", "b", 4), readySlice("north", "c", 4)}
	members := []MemberCPU{cpu("east", 8000), cpu("west", 8000), cpu("north", 8000)}
	for i, region := range []string{"eu", "eu", "us"} {
		members[i].Properties = map[string]string{"region.topology.k8s.io": region}
	}
	ready := func(i int) locality.Member {
		return locality.Member{Name: members[i].Cluster, CPU: members[i].CPU, HasCPU: true, Ready: locality.CountReady(slices[i : i+1])}
	}
	tiers := map[string][][]string{"east": {{"east", "west"}}, "west": {{"east", "west"}}, "north": {{"north"}}}
	published := locality.DecideTiers([]locality.Member{ready(0), ready(1), ready(2)}, tiers, "", false, locality.SelectionBounded, locality.DefaultOptions()).Annotation
	in := ImportInputs{Self: "east", Import: si, Derived: testDerived(si, published), Slices: slices, Members: members,
		Broker: true, Settings: DefaultSettings()}
	rep := ExplainImport(in)
	var out strings.Builder
	if err := rep.Render(&out); err != nil {
		t.Fatal(err)
	}
	if len(rep.Differences) != 0 || !strings.Contains(out.String(), "selectors:  "+regionOnly) || !strings.Contains(out.String(), "cluster selection bounded") {
		t.Fatalf("differences %q:\n%s", rep.Differences, out.String())
	}
	// Without the broker the tiers cannot be re-derived: said, not reported as a difference.
	in.Broker = false
	if rep := ExplainImport(in); len(rep.Differences) != 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "only their broker Leases show") {
		t.Fatalf("without the broker: differences %q, notes %q", rep.Differences, rep.Notes)
	}
	// --cluster-selection=first-ready decides otherwise: the published bounded allocation differs.
	s, problems := SettingsFromArgs([]string{"--cluster-selection", "first-ready"}, "test")
	in.Broker, in.Settings = true, s
	if rep := ExplainImport(in); len(problems) != 0 || len(rep.Differences) == 0 {
		t.Fatalf("first-ready: problems %q, differences %q", problems, rep.Differences)
	}
}
