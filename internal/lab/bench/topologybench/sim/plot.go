package sim

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotPoint is one algorithm's position in the trade-off picture.
type PlotPoint struct {
	Algorithm string
	Threshold float64
	InZone    float64 // mean in-zone score
	Deviation float64 // mean deviation score
}

// PointOf extracts the plotted means of a result.
func PointOf(s *Stats) PlotPoint {
	return PlotPoint{Algorithm: s.Algorithm, Threshold: s.Threshold, InZone: s.Mean(s.InZone), Deviation: s.Mean(s.Deviation)}
}

// WritePlot draws mean in-zone score against mean deviation score: fleetslice's points joined
// in threshold order, every other algorithm as a labelled point. The format follows the file
// extension (.svg, .png, .pdf).
func WritePlot(path string, points []PlotPoint) error {
	p := plot.New()
	p.Title.Text = "Published 3-zone space: in-zone traffic vs load deviation"
	p.X.Label.Text = "mean deviation score (100 = every endpoint gets its fair share)"
	p.Y.Label.Text = "mean in-zone score (% of traffic kept in zone)"
	p.Add(plotter.NewGrid())

	var ours plotter.XYLabels
	var others plotter.XYLabels
	sorted := append([]PlotPoint(nil), points...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Threshold < sorted[j].Threshold })
	for _, pt := range sorted {
		xy := plotter.XY{X: pt.Deviation, Y: pt.InZone}
		if pt.Algorithm == Fleetslice {
			ours.XYs = append(ours.XYs, xy)
			ours.Labels = append(ours.Labels, fmt.Sprintf("%.2f", pt.Threshold))
			continue
		}
		others.XYs = append(others.XYs, xy)
		label := pt.Algorithm
		if pt.Algorithm == Upstream {
			label = fmt.Sprintf("upstream (%.1f)", pt.Threshold)
		}
		others.Labels = append(others.Labels, label)
	}
	if len(ours.XYs) > 0 {
		line, dots, err := plotter.NewLinePoints(ours)
		if err != nil {
			return err
		}
		blue := color.RGBA{B: 200, A: 255}
		line.Color, dots.Color = blue, blue
		dots.Shape = draw.CircleGlyph{}
		labels, err := plotter.NewLabels(ours)
		if err != nil {
			return err
		}
		labels.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(2)}
		p.Add(line, dots, labels)
		p.Legend.Add("fleetslice (label: overload threshold)", line, dots)
	}
	if len(others.XYs) > 0 {
		dots, err := plotter.NewScatter(others)
		if err != nil {
			return err
		}
		dots.Color = color.RGBA{R: 200, A: 255}
		dots.Shape = draw.SquareGlyph{}
		dots.Radius = vg.Points(4)
		labels, err := plotter.NewLabels(others)
		if err != nil {
			return err
		}
		labels.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(-10)}
		p.Add(dots, labels)
		p.Legend.Add("original / upstream", dots)
	}
	p.Legend.Top = false
	p.Legend.Left = true
	// Leave room for the labels right of the rightmost point.
	p.X.Max += 3
	p.Y.Max += 2
	return p.Save(8*vg.Inch, 6*vg.Inch, path)
}
