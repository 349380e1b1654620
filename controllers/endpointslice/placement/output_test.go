package placement

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// A layout that both deletes and creates a slice is written as one update
// of the deleted slice. Compaction's cost model counts writes that way.
func TestBuildPairsCreatesWithDeletes(t *testing.T) {
	gone := slice("gone", ep(0))
	in := input(10, 0, eps(0, 2), gone)
	p := newPlanner(in)
	p.slots[0].gone = true
	fresh := p.newSlot()
	fresh.entries = []entry{{ep: &in.Desired[0], desired: 0}, {ep: &in.Desired[1], desired: 1}}
	p.origin[0] = 0
	r := p.build()
	if len(r.Create) != 0 || len(r.Delete) != 0 || !slices.Equal(names(r.Update), []string{"gone"}) {
		t.Fatalf("create %v update %v delete %v, want one update of gone", sizes(r.Create), names(r.Update), names(r.Delete))
	}
	if got := layout(r.Update); !slices.Equal(got["gone"], []string{"p0", "p1"}) {
		t.Errorf("reused slice holds %v", got["gone"])
	}
	if r.Stats.Moved != 0 {
		t.Errorf("p0 ends in the slice it was in, yet Moved = %d", r.Stats.Moved)
	}
	if len(gone.Endpoints) != 1 {
		t.Errorf("the deleted input slice was modified")
	}
}

func TestMerge(t *testing.T) {
	oldPorts := slice("old-ports", ep(0))
	oldPorts.Labels["keep"] = "me"
	v6 := slice("v6", ep(1))
	v6.AddressType = discoveryv1.AddressTypeIPv6
	newPorts := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](9090), Protocol: ptr.To(corev1.ProtocolTCP)}}
	created := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Ports: newPorts, Endpoints: eps(0, 3)}
	createdV4Too := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Ports: newPorts, Endpoints: eps(3, 4)}
	kept := slice("kept", ep(9))
	boom := errors.New("boom")

	got := Merge(
		Result{Delete: []*discoveryv1.EndpointSlice{v6, oldPorts}, Stats: Stats{Desired: 0, Removed: 2}},
		Result{Create: []*discoveryv1.EndpointSlice{created, createdV4Too}, Update: []*discoveryv1.EndpointSlice{kept},
			Stats: Stats{Desired: 4, Added: 4}},
		Result{Err: boom},
	)
	// The first IPv4 create takes over old-ports; nothing takes over the IPv6
	// slice, and the second create stays a create.
	if !slices.Equal(names(got.Update), []string{"kept", "old-ports"}) || !slices.Equal(names(got.Delete), []string{"v6"}) ||
		!slices.Equal(sizes(got.Create), []int{1}) {
		t.Fatalf("update %v delete %v create %v", names(got.Update), names(got.Delete), sizes(got.Create))
	}
	reused := got.Update[1]
	if reused.Labels["keep"] != "me" || *reused.Ports[0].Port != 9090 || len(reused.Endpoints) != 3 {
		t.Errorf("reused slice %+v: want old-ports' metadata with the new ports and endpoints", reused)
	}
	if len(oldPorts.Endpoints) != 1 || *oldPorts.Ports[0].Port != 8080 {
		t.Errorf("Merge modified a deleted input slice")
	}
	if got.Stats != (Stats{Desired: 4, Added: 4, Removed: 2}) || !errors.Is(got.Err, boom) {
		t.Errorf("stats %+v err %v", got.Stats, got.Err)
	}
}
