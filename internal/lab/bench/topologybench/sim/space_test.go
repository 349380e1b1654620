package sim

import "testing"

func TestCaseCount(t *testing.T) {
	if got := CaseCount(); got != 39_273_145 {
		t.Fatalf("CaseCount() = %d, want the published 39,273,145", got)
	}
	n, high := 0, 0
	prev := Case{}
	ForEachCase(func(c Case) {
		n++
		e := c.Endpoints
		if e[0] > e[1] || e[1] > e[2] || c.Nodes[0] > c.Nodes[1] || c.Nodes[1] > c.Nodes[2] {
			t.Fatalf("case %v is not sorted as the published generator sorts it", c)
		}
		if c.TotalEndpoints() == 0 {
			t.Fatalf("all-zero case %v", c)
		}
		if c.Nodes == [Zones]int{30, 30, 30} {
			high++
			if (e[0]-100)%7 != 0 || e[2] > 1000 {
				t.Fatalf("high case %v off the 100..1000 step 7 grid", c)
			}
		} else if e[2] > 100 || c.Nodes[2] > 10 || c.Nodes[0] < 1 {
			t.Fatalf("low case %v out of range", c)
		}
		if n > 1 && c == prev {
			t.Fatalf("case %v repeated", c)
		}
		prev = c
	})
	if n != 39_273_145 || high != 366_145 {
		t.Fatalf("enumerated %d cases (%d high), want 39,273,145 (366,145 high)", n, high)
	}
}

func TestSamplerPicksExactlyN(t *testing.T) {
	for _, tc := range []struct{ n, total int }{{7, 100}, {100, 100}, {1, 39_273_145}, {1000, 39_273_145}, {0, 10}} {
		s := sampler{n: tc.n, total: tc.total}
		got := 0
		for i := range tc.total {
			if s.picks(i) {
				got++
			}
		}
		want := tc.n
		if tc.n <= 0 || tc.n > tc.total {
			want = tc.total
		}
		if got != want {
			t.Errorf("sampler{%d,%d} picked %d", tc.n, tc.total, got)
		}
	}
}
