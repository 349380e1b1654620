package slicediff

import (
	"fmt"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// WriteSeriesPlot draws one value of each side's series against the scenario's events, one
// line per controller; the file extension picks the format (.svg, .png).
func WriteSeriesPlot(path, title, yLabel string, sides []SideResult, value func(Point) float64) error {
	lines := make([]bench.Line, 0, len(sides))
	for _, side := range sides {
		if len(side.Series) == 0 {
			return fmt.Errorf("%s has no series to plot", side.Controller)
		}
		line := bench.Line{Name: side.Controller, Points: make([]bench.Point, len(side.Series))}
		for j, pt := range side.Series {
			line.Points[j] = bench.Point{X: float64(pt.Events), Y: value(pt)}
		}
		lines = append(lines, line)
	}
	return bench.WriteLineChart(path, title, "Pod changes applied", yLabel, lines)
}
