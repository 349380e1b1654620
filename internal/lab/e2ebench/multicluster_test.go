package e2ebench

import (
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	cases := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"p out of range low", ms(1, 2), 0, 0},
		{"p out of range high", ms(1, 2), 101, 0},
		{"NaN p", ms(1, 2), nan(), 0},
		{"single", ms(7), 50, 7 * time.Millisecond},
		{"median of odd count", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median of even count is the lower middle", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(rangeMs(100)...), 99, 99 * time.Millisecond},
		{"p99 of 10 is the max", ms(rangeMs(10)...), 99, 10 * time.Millisecond},
		{"max", ms(9, 2, 30, 4), 100, 30 * time.Millisecond},
		{"tiny p is the min", ms(9, 2, 30, 4), 0.001, 2 * time.Millisecond},
		{"negative values sort first", ms(-5, 3, 1), 1, -5 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.in, c.p); got != c.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
			}
		})
	}
}

func TestPercentileLeavesInputAlone(t *testing.T) {
	in := []time.Duration{3, 1, 2}
	Percentile(in, 50)
	if !slices.Equal(in, []time.Duration{3, 1, 2}) {
		t.Errorf("input reordered to %v", in)
	}
}

// FuzzPercentile checks that any percentile is one of the values, between min and max, and never
// decreases as p grows.
func FuzzPercentile(f *testing.F) {
	f.Add([]byte{1, 2, 3}, 50.0, 99.0)
	f.Add([]byte{200, 0, 7, 7, 9}, 1.0, 100.0)
	f.Add([]byte{}, 50.0, 50.0)
	f.Fuzz(func(t *testing.T, raw []byte, p, q float64) {
		ds := make([]time.Duration, len(raw))
		for i, b := range raw {
			ds[i] = time.Duration(int(b)-128) * time.Millisecond
		}
		lo, hi := min(p, q), max(p, q)
		a, b := Percentile(ds, lo), Percentile(ds, hi)
		valid := func(p float64) bool { return len(ds) > 0 && p > 0 && p <= 100 }
		if valid(lo) && !slices.Contains(ds, a) {
			t.Fatalf("p%v = %v is not one of %v", lo, a, ds)
		}
		if valid(lo) && valid(hi) && a > b {
			t.Fatalf("p%v = %v above p%v = %v", lo, a, hi, b)
		}
		if valid(hi) && b > slices.Max(ds) {
			t.Fatalf("p%v = %v above the max", hi, b)
		}
	})
}

func BenchmarkPercentile(b *testing.B) {
	ds := make([]time.Duration, 600)
	for i := range ds {
		ds[i] = time.Duration((i * 7919) % 1000)
	}
	for b.Loop() {
		Percentile(ds, 99)
	}
}

func rangeMs(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}
