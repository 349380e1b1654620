package agentbench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The sync metrics kube-proxy exposes and the agent repeats under its own prefix (agent/metrics.go),
// without the prefix. Both are histograms but the last one, a gauge in Unix seconds.
const (
	metricSync        = "sync_proxy_rules_duration_seconds"
	metricSyncFull    = "sync_full_proxy_rules_duration_seconds"
	metricSyncPartial = "sync_partial_proxy_rules_duration_seconds"
	metricProgramming = "network_programming_duration_seconds"
	metricLastSync    = "sync_proxy_rules_last_timestamp_seconds"
)

// scrape is one reading of a Prometheus text endpoint: each series, spelled as in the text
// (name, or name{labels}), to its value.
type scrape map[string]float64

// parseMetrics reads the Prometheus text exposition format. Comments and blank lines are skipped;
// a sample's optional timestamp is ignored. A line it cannot read is an error, not a guess.
func parseMetrics(text string) (scrape, error) {
	out := scrape{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, rest := line, ""
		if i := strings.IndexByte(line, '}'); i >= 0 && strings.IndexByte(line, '{') >= 0 && strings.IndexByte(line, '{') < i {
			series, rest = line[:i+1], strings.TrimSpace(line[i+1:])
		} else if i := strings.IndexAny(line, " \t"); i >= 0 {
			series, rest = line[:i], strings.TrimSpace(line[i+1:])
		} else {
			return nil, fmt.Errorf("metrics line %d: no value in %q", n+1, line)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 {
			return nil, fmt.Errorf("metrics line %d: want a value and an optional timestamp in %q", n+1, line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: value of %s: %w", n+1, series, err)
		}
		out[series] = v
	}
	return out, nil
}

// histogram is a histogram's running sum and count.
type histogram struct{ sum, count float64 }

// series returns the values of every series of the named metric, whatever its labels
// (kube-proxy labels its sync metrics with ip_family, the agent does not).
func (s scrape) series(name string) []float64 {
	var out []float64
	for key, v := range s {
		if key == name || (strings.HasPrefix(key, name+"{")) {
			out = append(out, v)
		}
	}
	return out
}

// histogram reads a histogram, summed over its label sets; a missing one reads as empty, as
// before its first observation.
func (s scrape) histogram(name string) histogram {
	var h histogram
	for _, v := range s.series(name + "_sum") {
		h.sum += v
	}
	for _, v := range s.series(name + "_count") {
		h.count += v
	}
	return h
}

// latest is the largest value of the named gauge over its label sets, 0 when absent.
func (s scrape) latest(name string) float64 {
	var out float64
	for _, v := range s.series(name) {
		out = max(out, v)
	}
	return out
}

// since is the mean of the observations made between before and h, and how many there were.
// No observation gives NaN, which the tables print as "n/a".
func (h histogram) since(before histogram) (mean float64, count int) {
	c := h.count - before.count
	if c <= 0 {
		return math.NaN(), 0
	}
	return (h.sum - before.sum) / c, int(c)
}
