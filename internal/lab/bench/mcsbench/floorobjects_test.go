package mcsbench

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/lightset"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

// A floor is only a floor of fleetslice's writes if it writes the same objects: the API server's
// cost of a write grows with what the object holds. This converges a two-member ClusterSet on
// the bench's workload, then writes the bulk start's floor beside it in the same API servers
// and compares every object fleetslice wrote with the floor's: the same fields, and sizes
// within a few bytes (names, IPs and times differ). The same for the broker comeback's floor:
// the slices one endpoint change updates, as fleetslice updated them and as the floor does.
func TestFloorObjectsAreTheObjectsOfAConvergedClusterSet(t *testing.T) {
	if _, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer); err != nil {
		t.Skipf("envtest binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := clustersettest.Start(ctx, clustersettest.Options{
		Members: []string{lightset.MemberID(0), lightset.MemberID(1)}, WithoutEndpointSliceController: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cs.Stop(); err != nil {
			t.Error(err)
		}
	}()
	f := &fleet{o: fleetOptions{members: 2, services: 1, log: io.Discard},
		set: &lightset.Set{Broker: &testenv.Cluster{Name: "broker", Config: cs.Broker.Config, Client: cs.Broker.Client}}}
	imported := map[string][]string{}
	for m, member := range cs.Members {
		f.set.IDs = append(f.set.IDs, member.Name)
		f.set.Members = append(f.set.Members, &testenv.Cluster{Name: member.Name, Config: member.Config, Client: member.Client})
		imported[member.Name] = []string{memberAddress(m, 0, 0)}
	}
	if err := f.populate(ctx); err != nil {
		t.Fatal(err)
	}
	name := fleetService(0)
	for _, member := range cs.Members {
		if err := member.WaitForImportedAddresses(ctx, fleetNamespace, name, imported); err != nil {
			t.Fatal(err)
		}
		if _, err := member.WaitForServiceImport(ctx, fleetNamespace, name); err != nil {
			t.Fatal(err)
		}
		waitExported(ctx, t, member, name)
	}
	// A comeback's change, made once the set converged: the comeback floor's updates are
	// compared with what fleetslice made of it.
	beforeChange, err := f.readFloorInputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	change := []fleetChange{{member: 0, service: 0}}
	if err := f.makeChanges(ctx, change); err != nil {
		t.Fatal(err)
	}
	imported[cs.Members[0].Name] = changedSlice(change[0])
	for _, member := range cs.Members {
		if err := member.WaitForImportedAddresses(ctx, fleetNamespace, name, imported); err != nil {
			t.Fatal(err)
		}
	}
	// Every member converged before any stops: a stopped member's Lease lapses within seconds,
	// and a peer still running would withdraw its endpoints.
	for _, member := range cs.Members {
		if err := member.StopControllers(); err != nil {
			t.Fatal(err)
		}
	}

	const floorNamespace = "floor-bulk"
	clients, err := f.floorClients(ctx, floorNamespace)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.floorJobs(ctx, clients, floorNamespace, bulkFloor(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runAll(ctx, clients, jobs); err != nil {
		t.Fatal(err)
	}

	for _, member := range cs.Members {
		c := member.Client
		for _, kind := range []struct {
			what string
			obj  func(namespace string) client.Object
		}{
			{"ServiceImport", func(ns string) client.Object { return get(ctx, t, c, ns, name, &mcsv1beta1.ServiceImport{}) }},
			{"ServiceExport", func(ns string) client.Object { return get(ctx, t, c, ns, name, &mcsv1beta1.ServiceExport{}) }},
			{"derived Service", func(ns string) client.Object {
				return get(ctx, t, c, ns, names.DerivedServiceName(ns, name), &corev1.Service{})
			}},
		} {
			sameShape(t, member.Name+" "+kind.what, kind.obj(fleetNamespace), kind.obj(floorNamespace))
		}
		importedSlices := func(ns string) []client.Object {
			return list(ctx, t, c, ns, &discoveryv1.EndpointSliceList{}, client.MatchingLabels{
				mcsv1beta1.LabelServiceName: name, discoveryv1.LabelManagedBy: sliceplan.ManagedBy})
		}
		sameShapes(t, member.Name+" imported slices", importedSlices(fleetNamespace), importedSlices(floorNamespace), 2)
	}
	published := map[string]string{v1alpha1.LabelServiceName: name}
	changedCopies := client.MatchingLabels(names.RecordLabels(cs.Members[0].Name, fleetNamespace, name))
	const comebackNamespace = "floor-comeback"
	if clients, err = f.floorClients(ctx, comebackNamespace); err != nil {
		t.Fatal(err)
	}
	updates, err := f.changeFloorJobs(ctx, clients, comebackNamespace, beforeChange, change)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runAll(ctx, clients, updates); err != nil {
		t.Fatal(err)
	}
	sameShapes(t, "broker slice copy after the change",
		list(ctx, t, cs.Broker.Client, cs.Broker.Namespace, &discoveryv1.EndpointSliceList{}, changedCopies),
		list(ctx, t, cs.Broker.Client, comebackNamespace, &discoveryv1.EndpointSliceList{}, changedCopies), 1)
	for _, member := range cs.Members {
		fromChanged := client.MatchingLabels{mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: cs.Members[0].Name}
		sameShapes(t, member.Name+" slice imported from the changed member",
			list(ctx, t, member.Client, fleetNamespace, &discoveryv1.EndpointSliceList{}, fromChanged),
			list(ctx, t, member.Client, comebackNamespace, &discoveryv1.EndpointSliceList{}, fromChanged), 1)
	}
	sameShapes(t, "broker records",
		list(ctx, t, cs.Broker.Client, cs.Broker.Namespace, &v1alpha1.ServiceExportRecordList{}, client.MatchingLabels(published)),
		list(ctx, t, cs.Broker.Client, floorNamespace, &v1alpha1.ServiceExportRecordList{}, client.MatchingLabels(published)), 2)
	sameShapes(t, "broker slice copies",
		list(ctx, t, cs.Broker.Client, cs.Broker.Namespace, &discoveryv1.EndpointSliceList{}, client.MatchingLabels(published)),
		list(ctx, t, cs.Broker.Client, floorNamespace, &discoveryv1.EndpointSliceList{}, client.MatchingLabels(published)), 2)
}

// waitExported waits until member's export of the Service has all three of its conditions.
func waitExported(ctx context.Context, t *testing.T, member *clustersettest.Member, name string) {
	t.Helper()
	for {
		e := &mcsv1beta1.ServiceExport{}
		err := member.Client.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: name}, e)
		if err == nil && len(e.Status.Conditions) == 3 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: export %s never got its conditions: %v %v", member.Name, name, err, e.Status.Conditions)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func get[T client.Object](ctx context.Context, t *testing.T, c client.Client, namespace, name string, obj T) T {
	t.Helper()
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func list(ctx context.Context, t *testing.T, c client.Client, namespace string, l client.ObjectList, opts ...client.ListOption) []client.Object {
	t.Helper()
	if err := c.List(ctx, l, append(opts, client.InNamespace(namespace))...); err != nil {
		t.Fatal(err)
	}
	items, err := apimeta.ExtractList(l)
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Object
	for _, o := range items {
		out = append(out, o.(client.Object))
	}
	slices.SortFunc(out, func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// sameShapes compares fleetslice's objects of one kind with the floor's, pairwise in name
// order, after checking there are want of each.
func sameShapes(t *testing.T, what string, fleetslice, floor []client.Object, want int) {
	t.Helper()
	if len(fleetslice) != want || len(floor) != want {
		t.Errorf("%s: fleetslice wrote %d, the floor %d, want %d of each", what, len(fleetslice), len(floor), want)
		return
	}
	for i := range fleetslice {
		sameShape(t, what, fleetslice[i], floor[i])
	}
}

// sameShape fails unless the two objects have the same field paths (map keys included, list
// items merged) and serialized sizes within 5%, leaving out what the API server sets.
func sameShape(t *testing.T, what string, fleetslice, floor client.Object) {
	t.Helper()
	a, aSize := shape(t, fleetslice)
	b, bSize := shape(t, floor)
	if !slices.Equal(a, b) {
		t.Errorf("%s: fields differ\nonly fleetslice's: %v\nonly the floor's: %v", what, missing(a, b), missing(b, a))
	}
	if diff := aSize - bSize; diff*20 > aSize || -diff*20 > aSize {
		t.Errorf("%s: fleetslice's object is %d bytes, the floor's %d", what, aSize, bSize)
	}
}

func shape(t *testing.T, obj client.Object) ([]string, int) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	meta, _ := doc["metadata"].(map[string]any)
	for _, serverSet := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "namespace"} {
		delete(meta, serverSet)
	}
	paths := map[string]bool{}
	walk("", doc, paths)
	raw, err = json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(paths)), len(raw)
}

func walk(path string, v any, paths map[string]bool) {
	paths[path] = true
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			walk(path+"."+k, child, paths)
		}
	case []any:
		for _, child := range v {
			walk(path+"[]", child, paths)
		}
	}
}

func missing(have, other []string) []string {
	var out []string
	for _, p := range have {
		if !slices.Contains(other, p) {
			out = append(out, p)
		}
	}
	return out
}
