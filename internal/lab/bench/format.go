package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Count formats an integer with thousands separators, as the tables print counts.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// Bytes formats a byte count in binary units.
func Bytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for math.Abs(n) >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// Ratio formats ours/theirs as a factor; zero over zero is "=" (both did nothing) and anything
// over zero is "n/a", since a factor would be meaningless.
func Ratio(ours, theirs float64) string {
	switch {
	case theirs == 0 && ours == 0:
		return "="
	case theirs == 0 || math.IsNaN(ours) || math.IsNaN(theirs):
		return "n/a"
	}
	r := ours / theirs
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// Micros formats a duration given in microseconds, switching to milliseconds from 1 ms.
func Micros(us float64) string {
	if math.Abs(us) >= 1000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.1f µs", us)
}

// Quantile returns the q-quantile (0..1) of ds by the nearest rank, or 0 when there are none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, min(len(s)-1, int(q*float64(len(s))+0.999999)-1))]
}
