package bench

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Line is one named series of a line chart.
type Line struct {
	Name   string
	Points []Point
}

// Point is one (x, y) of a Line.
type Point struct{ X, Y float64 }

// controllerColors keeps each controller's colour the same in every picture of the document.
var controllerColors = map[string]color.Color{
	"upstream":                color.RGBA{R: 200, G: 60, B: 30, A: 255},
	"kube-controller-manager": color.RGBA{R: 200, G: 60, B: 30, A: 255},
	"fleetslice":              color.RGBA{R: 30, G: 80, B: 200, A: 255},
}

// WriteLineChart draws lines against a shared x axis starting at zero; the file extension picks
// the format (.svg, .png). Lines after the first are dashed so they stay apart in greyscale.
func WriteLineChart(path, title, xLabel, yLabel string, lines []Line) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	palette := []color.Color{color.Black, color.RGBA{G: 140, A: 255}, color.RGBA{R: 140, B: 140, A: 255}}
	for i, l := range lines {
		if len(l.Points) == 0 {
			return fmt.Errorf("line %q has no points", l.Name)
		}
		xys := make(plotter.XYs, len(l.Points))
		for j, pt := range l.Points {
			xys[j] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = controllerColors[l.Name]
		if line.Color == nil {
			line.Color = palette[i%len(palette)]
		}
		line.Width = vg.Points(1.5)
		if i > 0 {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(l.Name, line)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.X.Min, p.Y.Min = 0, 0
	p.X.Tick.Marker, p.Y.Tick.Marker = WholeTicks{}, WholeTicks{}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}

// WholeTicks labels ticks as whole numbers: counts of writes, slices and changes.
type WholeTicks struct{}

// Ticks implements plot.Ticker.
func (WholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', 0, 64)
		}
	}
	return ticks
}
