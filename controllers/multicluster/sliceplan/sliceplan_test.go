package sliceplan

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

func TestSourceSlicesSkipsOursOthersAndDeleted(t *testing.T) {
	mine := localSlice("shop", "web", "web-abc", "10.0.0.1")
	other := localSlice("shop", "api", "api-abc", "10.0.0.2")
	imported := localSlice("shop", "web", "web-imported", "10.0.0.3")
	imported.Labels[discoveryv1.LabelManagedBy] = ManagedBy
	deleting := localSlice("shop", "web", "web-old", "10.0.0.4")
	deleting.DeletionTimestamp = &metav1.Time{}
	second := localSlice("shop", "web", "web-aaa", "10.0.0.5")
	got := SourceSlices("web", []discoveryv1.EndpointSlice{mine, other, imported, deleting, second})
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"web-aaa", "web-abc"}) {
		t.Fatalf("SourceSlices = %v, want [web-aaa web-abc]", names)
	}
}

func TestBrokerCopies(t *testing.T) {
	src := localSlice("shop", "web", "web-abc", "10.0.0.1", "10.0.0.2")
	copies := BrokerCopies("east", "broker", "shop", "web", []*discoveryv1.EndpointSlice{&src})
	if len(copies) != 1 {
		t.Fatalf("got %d copies, want 1", len(copies))
	}
	c := copies[0]
	if c.Namespace != "broker" || c.Name != names.RecordName("east", "shop", "web-abc") {
		t.Fatalf("copy is %s/%s", c.Namespace, c.Name)
	}
	wantLabels := names.RecordLabels("east", "shop", "web")
	wantLabels[discoveryv1.LabelManagedBy] = ManagedBy
	if !equality.Semantic.DeepEqual(c.Labels, wantLabels) {
		t.Fatalf("labels %v, want %v", c.Labels, wantLabels)
	}
	if c.Annotations[AnnotationSourceSlice] != "web-abc" {
		t.Fatalf("source annotation %q", c.Annotations[AnnotationSourceSlice])
	}
	if len(c.OwnerReferences) != 0 || c.ResourceVersion != "" || c.Labels[discoveryv1.LabelServiceName] != "" {
		t.Fatal("a copy must not carry owners, resource versions or the upstream service-name label")
	}
	for i, ep := range c.Endpoints {
		if ep.NodeName != nil || ep.TargetRef != nil {
			t.Fatalf("endpoint %d keeps source-cluster-only fields", i)
		}
		if *ep.Zone != *src.Endpoints[i].Zone || !equality.Semantic.DeepEqual(ep.Hints, src.Endpoints[i].Hints) || *ep.Hostname != *src.Endpoints[i].Hostname {
			t.Fatalf("endpoint %d lost its zone, hints or hostname", i)
		}
	}
	if src.Endpoints[0].NodeName == nil {
		t.Fatal("copying changed the source slice")
	}
}

func TestImported(t *testing.T) {
	src := localSlice("shop", "web", "web-abc", "10.0.0.1")
	copies := BrokerCopies("west", "broker", "shop", "web", []*discoveryv1.EndpointSlice{&src})
	brokerView := []discoveryv1.EndpointSlice{*copies[0]}
	owner := &metav1.OwnerReference{APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceImport", Name: "web", UID: "si-uid", Controller: ptr.To(true)}
	local := localSlice("shop", "web", "web-local", "10.1.0.1")

	sources := append(SourcesFromBroker(brokerView, []string{"west"}), LocalSources("east", []*discoveryv1.EndpointSlice{&local})...)
	got := Imported(Target{Namespace: "shop", Service: "web", DerivedService: "derived-x", Owner: owner}, sources)
	if len(got) != 2 {
		t.Fatalf("got %d imported slices, want 2", len(got))
	}
	byCluster := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range got {
		byCluster[s.Labels[mcsv1beta1.LabelSourceCluster]] = s
		if s.Labels[mcsv1beta1.LabelServiceName] != "web" || s.Labels[discoveryv1.LabelServiceName] != "derived-x" || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
			t.Fatalf("labels %v", s.Labels)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "si-uid" {
			t.Fatalf("owners %v", s.OwnerReferences)
		}
		if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
			t.Fatalf("name %q: %v", s.Name, errs)
		}
	}
	if byCluster["west"] == nil || byCluster["east"] == nil {
		t.Fatalf("clusters %v", byCluster)
	}
	if byCluster["east"].Endpoints[0].NodeName == nil {
		t.Fatal("this cluster's own endpoints keep their node names")
	}
	if byCluster["west"].Name != names.ImportedName("web", "west", "web-abc") {
		t.Fatal("imported name must derive from the source slice, not the broker copy")
	}

	headless := Imported(Target{Namespace: "shop", Service: "web"}, sources)
	for _, s := range headless {
		if _, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
			t.Fatal("a headless import has no derived Service to name")
		}
		if _, ok := s.Labels[LabelHeadless]; !ok {
			t.Fatal("a headless import's slices are marked headless")
		}
	}
	if only := SourcesFromBroker(brokerView, []string{"east"}); len(only) != 0 {
		t.Fatal("copies of clusters not asked for must be skipped")
	}
}

func TestPlan(t *testing.T) {
	a := localSlice("shop", "web", "a", "10.0.0.1")
	b := localSlice("shop", "web", "b", "10.0.0.2")
	c := localSlice("shop", "web", "c", "10.0.0.3")
	changedB := b.DeepCopy()
	changedB.Endpoints[0].Addresses = []string{"10.0.0.9"}
	changedB.ResourceVersion = ""
	retypedC := c.DeepCopy()
	retypedC.AddressType = discoveryv1.AddressTypeIPv6
	d := localSlice("shop", "web", "d", "10.0.0.4")

	changes := Plan([]*discoveryv1.EndpointSlice{a.DeepCopy(), changedB, retypedC, &d}, []discoveryv1.EndpointSlice{a, b, c, localSlice("shop", "web", "e")})
	names := func(list []*discoveryv1.EndpointSlice) []string {
		var out []string
		for _, s := range list {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(changes.Create); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("create %v", got)
	}
	if got := names(changes.Update); !slices.Equal(got, []string{"b"}) {
		t.Errorf("update %v", got)
	}
	if changes.Update[0].ResourceVersion != "17" {
		t.Errorf("an update must carry the existing resourceVersion, got %q", changes.Update[0].ResourceVersion)
	}
	if got := names(changes.Delete); !slices.Equal(got, []string{"c", "e"}) {
		t.Errorf("delete %v", got)
	}
	if !Plan([]*discoveryv1.EndpointSlice{a.DeepCopy()}, []discoveryv1.EndpointSlice{a}).Empty() {
		t.Error("identical content must not be rewritten")
	}
}
