package liveness

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func lease(cluster string, renewedAfter time.Duration, duration time.Duration) Lease {
	return Lease{Cluster: cluster, RenewTime: t0.Add(renewedAfter), Duration: duration}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name     string
		leases   []Lease
		live     []string
		lost     []string
		noLease  bool // whether a cluster without a lease counts as live
		wantZero bool
	}{
		{
			name:     "own lease not seen yet: everyone is live",
			leases:   []Lease{lease("b", 0, 3*time.Second)},
			live:     []string{"a", "b", "c"},
			noLease:  true,
			wantZero: true,
		},
		{
			name:   "peer renewed within its duration of our renewal",
			leases: []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 8*time.Second, 3*time.Second)},
			live:   []string{"a", "b"},
			lost:   []string{"c"},
		},
		{
			name:   "expiry exactly at the reference still counts as live",
			leases: []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 7*time.Second, 3*time.Second)},
			live:   []string{"a", "b"},
		},
		{
			name:   "peer past its expiry is lost",
			leases: []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 6*time.Second, 3*time.Second)},
			live:   []string{"a"},
			lost:   []string{"b"},
		},
		{
			name:   "the peer's own duration is used, not ours",
			leases: []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 0, 30*time.Second)},
			live:   []string{"a", "b"},
		},
		{
			name:   "duplicate leases of one peer: the later expiry wins",
			leases: []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 0, 3*time.Second), lease("b", 9*time.Second, 3*time.Second)},
			live:   []string{"a", "b"},
		},
		{
			name:   "zero renew time of a peer is long expired",
			leases: []Lease{lease("a", 10*time.Second, 3*time.Second), {Cluster: "b", Duration: 3 * time.Second}},
			lost:   []string{"b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge("a", tc.leases)
			if v.Reference.IsZero() != tc.wantZero {
				t.Fatalf("reference %v, want zero=%v", v.Reference, tc.wantZero)
			}
			for _, c := range tc.live {
				if !v.IsLive(c) {
					t.Errorf("%s judged lost, want live", c)
				}
			}
			for _, c := range tc.lost {
				if v.IsLive(c) {
					t.Errorf("%s judged live, want lost", c)
				}
			}
			if v.IsLive("no-lease") != tc.noLease {
				t.Errorf("cluster without lease live=%v, want %v", v.IsLive("no-lease"), tc.noLease)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	before := Judge("a", []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 9*time.Second, 3*time.Second), lease("c", 9*time.Second, 3*time.Second)})
	after := Judge("a", []Lease{lease("a", 13*time.Second, 3*time.Second), lease("b", 9*time.Second, 3*time.Second), lease("c", 12*time.Second, 3*time.Second)})
	change := Diff(before, after)
	if !slices.Equal(change.Clusters, []string{"b"}) || change.Everyone {
		t.Fatalf("Diff = %+v, want only b", change)
	}
	back := Diff(after, before)
	if !slices.Equal(back.Clusters, []string{"b"}) {
		t.Fatalf("reverse Diff = %+v, want b", back)
	}
	if !Diff(before, before).Empty() {
		t.Fatal("a verdict differs from itself")
	}
	first := Diff(Judge("a", nil), before)
	if !first.Everyone {
		t.Fatal("the reference becoming known must re-examine every cluster")
	}
	// A peer that disappears entirely (its lease deleted) counts as a change.
	gone := Judge("a", []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 9*time.Second, 3*time.Second)})
	if change := Diff(before, gone); !slices.Equal(change.Clusters, []string{"c"}) {
		t.Fatalf("lease deletion Diff = %+v, want c", change)
	}
}

func TestFromLease(t *testing.T) {
	seconds := int32(7)
	renew := metav1.NewMicroTime(t0)
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  Lease
		ok    bool
	}{
		{name: "nil", lease: nil},
		{name: "no label", lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "member-a"}}},
		{
			name:  "name does not match label",
			lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "member-b", Labels: map[string]string{v1alpha1.LabelSourceCluster: "a"}}},
		},
		{
			name: "full",
			lease: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "member-a", Labels: map[string]string{v1alpha1.LabelSourceCluster: "a"}},
				Spec:       coordinationv1.LeaseSpec{RenewTime: &renew, LeaseDurationSeconds: &seconds},
			},
			want: Lease{Cluster: "a", RenewTime: t0, Duration: 7 * time.Second},
			ok:   true,
		},
		{
			name: "acquire time and default duration",
			lease: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "member-a", Labels: map[string]string{v1alpha1.LabelSourceCluster: "a"}},
				Spec:       coordinationv1.LeaseSpec{AcquireTime: &renew},
			},
			want: Lease{Cluster: "a", RenewTime: t0, Duration: 30 * time.Second},
			ok:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FromLease(tc.lease, 30*time.Second)
			if ok != tc.ok || (ok && !(got.Cluster == tc.want.Cluster && got.RenewTime.Equal(tc.want.RenewTime) && got.Duration == tc.want.Duration)) {
				t.Fatalf("FromLease = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzJudge checks the invariants every verdict must keep, whatever the leases say.
func FuzzJudge(f *testing.F) {
	f.Add(int64(10), int64(9), int64(3), int64(4), int64(3), int64(2))
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(100), int64(-5), int64(1), int64(99), int64(1), int64(50))
	f.Fuzz(func(t *testing.T, self, b, bDur, c, cDur, advance int64) {
		leases := []Lease{
			{Cluster: "a", RenewTime: t0.Add(time.Duration(self) * time.Second), Duration: 3 * time.Second},
			{Cluster: "b", RenewTime: t0.Add(time.Duration(b) * time.Second), Duration: time.Duration(bDur) * time.Second},
			{Cluster: "c", RenewTime: t0.Add(time.Duration(c) * time.Second), Duration: time.Duration(cDur) * time.Second},
		}
		v := Judge("a", leases)
		if !v.IsLive("a") {
			t.Fatal("a member must always be live in its own eyes")
		}
		// A peer whose lease expires later is live whenever one expiring earlier is.
		if leases[1].Expiry().After(leases[2].Expiry()) && v.IsLive("c") && !v.IsLive("b") {
			t.Fatalf("b expires later than c but only c is live: %+v", v)
		}
		// Our own renewal moving forward never brings a lost peer back.
		if advance < 0 {
			advance = -advance
		}
		moved := slices.Clone(leases)
		moved[0].RenewTime = moved[0].RenewTime.Add(time.Duration(advance%1000) * time.Second)
		later := Judge("a", moved)
		for _, peer := range []string{"b", "c"} {
			if !v.IsLive(peer) && later.IsLive(peer) {
				t.Fatalf("%s came back only because our own renewal advanced", peer)
			}
		}
		change := Diff(v, later)
		for _, peer := range []string{"b", "c"} {
			flipped := v.IsLive(peer) != later.IsLive(peer)
			if flipped != slices.Contains(change.Clusters, peer) {
				t.Fatalf("Diff %+v disagrees with the verdicts for %s", change, peer)
			}
		}
		// Input order does not matter.
		reversed := slices.Clone(leases)
		slices.Reverse(reversed)
		if !Diff(v, Judge("a", reversed)).Empty() {
			t.Fatal("the verdict depends on the order of the leases")
		}
	})
}

func BenchmarkJudge(b *testing.B) {
	for _, n := range []int{3, 100, 1000} {
		leases := make([]Lease, n)
		for i := range leases {
			leases[i] = lease(fmt.Sprintf("cluster-%d", i), time.Duration(i%7)*time.Second, 3*time.Second)
		}
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			prev := Judge("cluster-0", leases)
			for b.Loop() {
				next := Judge("cluster-0", leases)
				_ = Diff(prev, next)
			}
		})
	}
}
