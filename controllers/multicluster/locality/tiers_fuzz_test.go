package locality

import (
	"reflect"
	"slices"
	"testing"
)

// withTiers gives every cluster tiers decoded from b: each cluster lies in one of three
// regions, and the tiers follow one of the shapes selectors give: none, the KEP's own cluster
// then region, the region alone, everything outside the region (NotIn), or an arbitrary list
// of subsets, with names of clusters that do not exist now and then.
func withTiers(clusters []Cluster, b *bytes) []Cluster {
	out := slices.Clone(clusters)
	region := make([]int, len(out))
	for i := range out {
		region[i] = b.next() % 3
	}
	in := func(keep func(j int) bool) []string {
		var names []string
		for j := range out {
			if keep(j) {
				names = append(names, out[j].Name)
			}
		}
		return names
	}
	shape := b.next() % 5
	for i := range out {
		same := in(func(j int) bool { return region[j] == region[i] })
		switch shape {
		case 1:
			out[i].Tiers = [][]string{{out[i].Name}, same}
		case 2:
			out[i].Tiers = [][]string{same}
		case 3:
			out[i].Tiers = [][]string{in(func(j int) bool { return region[j] != region[i] }), same}
		case 4:
			for range b.next() % 4 {
				tier := in(func(int) bool { return b.next()%2 == 0 })
				if b.next()%5 == 0 {
					tier = append(tier, "gone")
				}
				out[i].Tiers = append(out[i].Tiers, tier)
			}
		}
	}
	return out
}

// FuzzAllocateTiers holds AllocateTiers to checkTiers' promises on random ClusterSets, tiers and
// histories, and also: without tiers a fresh decision is Allocate's; the order of the input does
// not matter; an allocation fed back is kept bit for bit. FirstReady's rows go only to the first
// tier with a ready endpoint, and are stable too.
func FuzzAllocateTiers(f *testing.F) {
	f.Add([]byte{25, 2, 0, 3, 0, 32, 2, 0, 32, 8, 0, 16, 20, 0, 1, 1, 1})
	f.Add([]byte{25, 2, 1, 2, 0, 32, 2, 0, 32, 8, 1, 1, 2, 4})
	f.Add([]byte{10, 4, 2, 4, 2, 6, 1, 4, 5, 0, 3, 0, 8, 7, 0, 0, 0, 1, 9, 2, 1, 0, 3, 3, 1, 0, 1})
	f.Add([]byte("three regions of clusters with zones, failovers, tiers and a previous allocation"))
	f.Fuzz(func(t *testing.T, data []byte) {
		clusters, previous, opts := fuzzCase(data)
		b := &bytes{data: data[min(len(data), 40):]}
		clusters = withTiers(clusters, b)
		res := AllocateTiers(clusters, previous, opts)
		checkTiers(t, clusters, previous, opts, res, previous == nil)
		if previous == nil && !slices.ContainsFunc(clusters, func(c Cluster) bool { return c.Tiers != nil }) && res.Mode != None {
			var idle []string
			for _, c := range clusters {
				if w, _ := totals(c); w == 0 {
					idle = append(idle, c.Name)
				}
			}
			sameRows(t, Allocate(clusters, nil, opts), res, idle...)
		}
		reversed := slices.Clone(clusters)
		slices.Reverse(reversed)
		prevReversed := slices.Clone(previous)
		slices.Reverse(prevReversed)
		if again := AllocateTiers(reversed, prevReversed, opts); !reflect.DeepEqual(again, res) {
			t.Fatalf("input order changed the result:\n%+v\n%+v", res, again)
		}
		if res.Mode == Local || res.Mode == Spill {
			again := AllocateTiers(clusters, res.Clusters, opts)
			if again.Changed || !reflect.DeepEqual(again.Clusters, res.Clusters) {
				t.Fatalf("feeding the allocation back changed it:\n%+v\n%+v", res.Clusters, again.Clusters)
			}
		}
		checkFirstReady(t, clusters, opts)
	})
}

func checkFirstReady(t *testing.T, clusters []Cluster, opts Options) {
	t.Helper()
	res := FirstReady(clusters, nil, opts)
	if res.Mode != Local && res.Mode != Spill {
		return
	}
	byName, _, _ := index(clusters)
	loadsOf(t, byName, res)
	for _, a := range res.Clusters {
		var first []string
		for _, tier := range byName[a.Cluster].Tiers {
			for _, name := range tier {
				if _, n := totals(byName[name]); n > 0 {
					first = append(first, name)
				}
			}
			if first != nil {
				break
			}
		}
		if first != nil && beyondLevel(a, first) > tolerance {
			t.Fatalf("%s's first tier with ready endpoints is %v, but it sends %+v", a.Cluster, first, a)
		}
	}
	if again := FirstReady(clusters, res.Clusters, opts); again.Changed {
		t.Fatalf("FirstReady fed back changed: %+v", again.Clusters)
	}
}

// BenchmarkAllocateTiers: a 50-cluster fleet in five regions with the KEP's own-cluster-then-
// region tiers, fresh and fed back.
func BenchmarkAllocateTiers(b *testing.B) {
	for _, size := range []int{3, 10, 50} {
		clusters := make([]Cluster, size)
		for i := range clusters {
			n := 10 + i%7
			if i%3 == 0 {
				n = 2
			}
			clusters[i] = cluster(string(rune('a'+i%26))+string(rune('a'+i/26)), int64(4000+1000*(i%5)), n)
		}
		for i := range clusters {
			var region []string
			for j := range clusters {
				if j%5 == i%5 {
					region = append(region, clusters[j].Name)
				}
			}
			clusters[i].Tiers = [][]string{{clusters[i].Name}, region}
		}
		opts := DefaultOptions()
		b.Run("fresh-"+itoa(size), func(b *testing.B) {
			for b.Loop() {
				AllocateTiers(clusters, nil, opts)
			}
		})
		previous := AllocateTiers(clusters, nil, opts).Clusters
		b.Run("unchanged-"+itoa(size), func(b *testing.B) {
			for b.Loop() {
				AllocateTiers(clusters, previous, opts)
			}
		})
	}
}

func itoa(n int) string { return string(rune('0'+n/10%10)) + string(rune('0'+n%10)) }
