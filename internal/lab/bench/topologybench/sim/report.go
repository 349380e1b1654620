package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// DynamicCSVHeader holds the dynamic run's columns.
var DynamicCSVHeader = []string{
	"alg name", "threshold", "cases", "events", "hint changes", "hint changes per event",
	"hysteresis toggles", "hinted steps %", "steps over threshold %", "max overload %",
	"mean inzone score", "seconds",
}

// Record formats d as one CSV row.
func (d *DynamicStats) Record() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	per := func(n int) float64 {
		if d.Events == 0 {
			return 0
		}
		return float64(n) / float64(d.Events)
	}
	return []string{
		d.Algorithm, f(d.Threshold), strconv.Itoa(d.Cases), strconv.Itoa(d.Events),
		strconv.Itoa(d.HintChanges), strconv.FormatFloat(per(d.HintChanges), 'f', 3, 64),
		strconv.Itoa(d.Toggles), f(100 * per(d.HintedSteps)), f(100 * per(d.OverSteps)),
		f(100*d.MaxOverload) + "%", f(100 * d.InZoneSum / float64(max(1, d.Events))),
		fmt.Sprintf("%.1f", d.Elapsed.Seconds()),
	}
}

// WriteDynamicCSV writes the header and one row per algorithm.
func WriteDynamicCSV(w io.Writer, results []DynamicStats) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(DynamicCSVHeader); err != nil {
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

// ReadPoints reads the plotted means back from a CSV written by WriteCSV, so a picture can be
// redrawn without rerunning the space.
func ReadPoints(r io.Reader) ([]PlotPoint, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("empty CSV")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, name := range []string{"alg name", "threshold", "mean inzone score", "mean deviation score"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("CSV lacks column %q", name)
		}
	}
	var points []PlotPoint
	for _, row := range rows[1:] {
		if len(row) != len(rows[0]) {
			return nil, fmt.Errorf("row %v has %d columns, want %d", row, len(row), len(rows[0]))
		}
		var pt PlotPoint
		pt.Algorithm = row[col["alg name"]]
		for name, dst := range map[string]*float64{"threshold": &pt.Threshold, "mean inzone score": &pt.InZone, "mean deviation score": &pt.Deviation} {
			if *dst, err = strconv.ParseFloat(row[col[name]], 64); err != nil {
				return nil, fmt.Errorf("column %q: %w", name, err)
			}
		}
		points = append(points, pt)
	}
	return points, nil
}
