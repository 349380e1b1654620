package multicluster

import (
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

func memberLease(cluster, resourceVersion string, milliCPU int64, props map[string]string) coordinationv1.Lease {
	annotations := locality.NodeCPU{MilliCPU: milliCPU}.Annotations()
	annotations[v1alpha1.AnnotationClusterProperties] = clusterselect.FormatProperties(props)
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: liveness.LeaseName(cluster), ResourceVersion: resourceVersion,
		Labels: map[string]string{v1alpha1.LabelSourceCluster: cluster}, Annotations: annotations,
	}}
}

// TestLeaseMembersFollowEveryLeaseChange: the remembered members are what parsing the Leases
// afresh gives, after a Lease changes (a new resourceVersion), when a member stops being live,
// and when a Lease goes away; Leases that are not a member's never count.
func TestLeaseMembersFollowEveryLeaseChange(t *testing.T) {
	all := func(string) bool { return true }
	fresh := func(leases []coordinationv1.Lease, live func(string) bool) []locality.Member {
		var out []locality.Member
		for i := range leases {
			if p := parseLease(&leases[i]); p.ok && live(p.member.Name) {
				out = append(out, p.member)
			}
		}
		return out
	}
	other := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "manager.fleetslice.io", ResourceVersion: "1"}}
	leases := []coordinationv1.Lease{memberLease("east", "1", 4000, map[string]string{"region": "eu"}), memberLease("west", "1", 2000, nil), other}
	var c leaseMembers
	check := func(step string, live func(string) bool) {
		t.Helper()
		if got, want := c.live(leases, live), fresh(leases, live); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %+v, want %+v", step, got, want)
		}
	}
	check("first reading", all)
	if got := c.live(leases, all); len(got) != 2 || got[0].CPU.MilliCPU != 4000 || got[0].Properties["region"] != "eu" {
		t.Fatalf("members %+v, want east with 4000m in eu and west", got)
	}
	leases[0] = memberLease("east", "2", 6000, map[string]string{"region": "us"})
	check("east's Lease changed", all)
	check("west no longer live", func(c string) bool { return c != "west" })
	leases = leases[:1]
	check("west's Lease gone", all)
	if len(c.byName) != 1 {
		t.Fatalf("remembers %d Leases after the others went, want 1", len(c.byName))
	}
}
