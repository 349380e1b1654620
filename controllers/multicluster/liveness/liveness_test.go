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

// steady judges as a member whose own renewals have run unbroken for an hour.
func steady(leases []Lease) Verdict {
	prev := Verdict{Self: "a", Since: t0.Add(-time.Hour)}
	for _, l := range leases {
		if l.Cluster == "a" {
			prev.Reference = l.RenewTime.Add(-time.Second)
		}
	}
	return Judge("a", leases, prev)
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
			v := steady(tc.leases)
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
	before := steady([]Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 9*time.Second, 3*time.Second), lease("c", 9*time.Second, 3*time.Second)})
	after := Judge("a", []Lease{lease("a", 13*time.Second, 3*time.Second), lease("b", 9*time.Second, 3*time.Second), lease("c", 12*time.Second, 3*time.Second)}, before)
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
	first := Diff(Judge("a", nil, Verdict{}), before)
	if !first.Everyone {
		t.Fatal("judging starting must re-examine every cluster")
	}
	// A peer that disappears entirely (its lease deleted) counts as a change.
	gone := Judge("a", []Lease{lease("a", 10*time.Second, 3*time.Second), lease("b", 9*time.Second, 3*time.Second)}, before)
	if change := Diff(before, gone); !slices.Equal(change.Clusters, []string{"c"}) {
		t.Fatalf("lease deletion Diff = %+v, want c", change)
	}
}

// TestGraceAfterAGap: after our own renewals stop for longer than our lease (a cut from the
// broker, or a restart), peers get one more lease duration to renew before they are judged.
func TestGraceAfterAGap(t *testing.T) {
	d := 3 * time.Second
	v := steady([]Lease{lease("a", 10*time.Second, d), lease("b", 9*time.Second, d)})
	if !v.IsLive("b") {
		t.Fatal("b renewed within its lease")
	}
	// We were cut off from 10s to 30s; b renewed for the last time at 9s.
	back := Judge("a", []Lease{lease("a", 30*time.Second, d), lease("b", 9*time.Second, d)}, v)
	if !back.IsLive("b") {
		t.Fatal("right after reconnecting, b must get time to renew")
	}
	if !back.Since.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("unbroken run restarts at 30s, got %v", back.Since)
	}
	// Our renewals continue; b never renews.
	later := Judge("a", []Lease{lease("a", 32*time.Second, d), lease("b", 9*time.Second, d)}, back)
	if !later.IsLive("b") {
		t.Fatal("still within the grace period")
	}
	lost := Judge("a", []Lease{lease("a", 34*time.Second, d), lease("b", 9*time.Second, d)}, later)
	if lost.IsLive("b") || lost.IsLive("no-lease") {
		t.Fatal("after the grace period b, and any cluster without a lease, is lost")
	}
	if change := Diff(later, lost); !slices.Equal(change.Clusters, []string{"b"}) || !change.Everyone {
		t.Fatalf("the end of the grace period must announce b and everyone: %+v", change)
	}
	// b renewing inside the grace period is simply live.
	renewed := Judge("a", []Lease{lease("a", 32*time.Second, d), lease("b", 31*time.Second, d)}, back)
	if !renewed.IsLive("b") {
		t.Fatal("b renewed")
	}
	// Starting up is a gap too.
	start := Judge("a", []Lease{lease("a", 0, d), lease("b", -time.Hour, d)}, Verdict{})
	if !start.IsLive("b") {
		t.Fatal("a member that has just started judges nobody lost")
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
		prev := Verdict{Self: "a", Reference: leases[0].RenewTime.Add(-time.Second), Since: t0.Add(-time.Hour)}
		v := Judge("a", leases, prev)
		if !v.IsLive("a") {
			t.Fatal("a member must always be live in its own eyes")
		}
		// A peer whose lease expires later is live whenever one expiring earlier is.
		if leases[1].Expiry().After(leases[2].Expiry()) && v.IsLive("c") && !v.IsLive("b") {
			t.Fatalf("b expires later than c but only c is live: %+v", v)
		}
		// Our own renewal moving forward within our lease never brings a lost peer back.
		if advance < 0 {
			advance = -advance
		}
		moved := slices.Clone(leases)
		moved[0].RenewTime = moved[0].RenewTime.Add(time.Duration(advance%4) * time.Second)
		later := Judge("a", moved, v)
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
		if !Diff(v, Judge("a", reversed, prev)).Empty() {
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
			prev := Judge("cluster-0", leases, Verdict{})
			for b.Loop() {
				next := Judge("cluster-0", leases, prev)
				_ = Diff(prev, next)
			}
		})
	}
}
