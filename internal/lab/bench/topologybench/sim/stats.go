package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Metric streams the sum, maximum and minimum of one per-case value.
type Metric struct {
	Sum, Max, Min float64
}

func (m *Metric) add(v float64, first bool) {
	m.Sum += v
	if first || v > m.Max {
		m.Max = v
	}
	if first || v < m.Min {
		m.Min = v
	}
}

func (m *Metric) merge(o Metric, first bool) {
	m.Sum += o.Sum
	if first || o.Max > m.Max {
		m.Max = o.Max
	}
	if first || o.Min < m.Min {
		m.Min = o.Min
	}
}

// overloadSlack keeps float noise in loads from counting as a broken threshold.
const overloadSlack = 1e-9

// Stats aggregate one algorithm over many cases without keeping them.
type Stats struct {
	Algorithm string
	Threshold float64 // fleetslice's threshold; upstream's own 0.2; 0 for original
	Invalid   int
	Valid     int
	Hinted    int // valid cases where the algorithm produced hints
	// OverThreshold counts valid cases where some endpoint expects more than (1+Threshold)
	// times its fair share.
	OverThreshold int

	Total, InZone, Deviation, Slice Metric
	// MaxDeviationPct and MaxOverloadPct are per-case maxima in percent.
	MaxDeviationPct, MaxOverloadPct Metric
	GroupedSlice, GroupedTotal      Metric

	Elapsed time.Duration
}

// Add folds one case's outcome in.
func (s *Stats) Add(o Outcome) {
	if o.Invalid {
		s.Invalid++
		return
	}
	first := s.Valid == 0
	s.Valid++
	if o.Hinted {
		s.Hinted++
	}
	if o.MaxOverload > s.Threshold+overloadSlack {
		s.OverThreshold++
	}
	sc := o.Score()
	s.Total.add(sc.Total, first)
	s.InZone.add(sc.InZone, first)
	s.Deviation.add(sc.Deviation, first)
	s.Slice.add(sc.Slice, first)
	s.GroupedSlice.add(sc.GroupedSlice, first)
	s.GroupedTotal.add(sc.GroupedTotal, first)
	s.MaxDeviationPct.add(o.MaxDeviation*100, first)
	s.MaxOverloadPct.add(o.MaxOverload*100, first)
}

// Merge folds another partial result in; merging in a fixed order keeps sums reproducible.
func (s *Stats) Merge(o Stats) {
	s.Invalid += o.Invalid
	if o.Valid == 0 {
		return
	}
	first := s.Valid == 0
	s.Valid += o.Valid
	s.Hinted += o.Hinted
	s.OverThreshold += o.OverThreshold
	s.Total.merge(o.Total, first)
	s.InZone.merge(o.InZone, first)
	s.Deviation.merge(o.Deviation, first)
	s.Slice.merge(o.Slice, first)
	s.GroupedSlice.merge(o.GroupedSlice, first)
	s.GroupedTotal.merge(o.GroupedTotal, first)
	s.MaxDeviationPct.merge(o.MaxDeviationPct, first)
	s.MaxOverloadPct.merge(o.MaxOverloadPct, first)
}

// Mean returns the mean of m over the valid cases.
func (s *Stats) Mean(m Metric) float64 {
	if s.Valid == 0 {
		return math.NaN()
	}
	return m.Sum / float64(s.Valid)
}

// CSVHeader holds the published results table's columns, then ours.
var CSVHeader = []string{
	"alg name", "invalid cases", "valid cases",
	"mean total score", "max total score", "min total score",
	"mean inzone score", "max inzone score", "min inzone score",
	"mean deviation score", "max deviation score", "min deviation score",
	"mean slice score", "max slice score", "min slice score",
	"max deviation %", "average max deviation %",
	// fleetslice's additions
	"threshold", "hinted cases", "cases over threshold", "max overload %", "average max overload %",
	"mean slice score (zone slices)", "mean total score (zone slices)", "seconds",
}

// Record formats s as one CSV row with the published two-decimal rounding.
func (s *Stats) Record() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	pct := func(v float64) string { return f(v) + "%" }
	return []string{
		s.Algorithm, strconv.Itoa(s.Invalid), strconv.Itoa(s.Valid),
		f(s.Mean(s.Total)), f(s.Total.Max), f(s.Total.Min),
		f(s.Mean(s.InZone)), f(s.InZone.Max), f(s.InZone.Min),
		f(s.Mean(s.Deviation)), f(s.Deviation.Max), f(s.Deviation.Min),
		f(s.Mean(s.Slice)), f(s.Slice.Max), f(s.Slice.Min),
		pct(s.MaxDeviationPct.Max), pct(s.Mean(s.MaxDeviationPct)),
		f(s.Threshold), strconv.Itoa(s.Hinted), strconv.Itoa(s.OverThreshold), pct(s.MaxOverloadPct.Max), pct(s.Mean(s.MaxOverloadPct)),
		f(s.Mean(s.GroupedSlice)), f(s.Mean(s.GroupedTotal)), fmt.Sprintf("%.1f", s.Elapsed.Seconds()),
	}
}

// WriteCSV writes the header and one row per result.
func WriteCSV(w io.Writer, results []Stats) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for i := range results {
		if err := cw.Write(results[i].Record()); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
