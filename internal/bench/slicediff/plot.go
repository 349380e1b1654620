package slicediff

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// sideColors keeps each controller's colour the same in every picture.
var sideColors = map[string]color.Color{
	Upstream:   color.RGBA{R: 200, G: 60, B: 30, A: 255},
	Fleetslice: color.RGBA{R: 30, G: 80, B: 200, A: 255},
}

// WriteSeriesPlot draws one value of each side's series against the scenario's events, one
// line per controller; the file extension picks the format (.svg, .png).
func WriteSeriesPlot(path, title, yLabel string, sides []SideResult, value func(Point) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Pod changes applied"
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	for i, side := range sides {
		if len(side.Series) == 0 {
			return fmt.Errorf("%s has no series to plot", side.Controller)
		}
		xys := make(plotter.XYs, len(side.Series))
		for j, pt := range side.Series {
			xys[j] = plotter.XY{X: float64(pt.Events), Y: value(pt)}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = sideColors[side.Controller]
		if line.Color == nil {
			line.Color = plotColor(i)
		}
		line.Width = vg.Points(1.5)
		if i > 0 {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(side.Controller, line)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	p.X.Tick.Marker = wholeTicks{}
	p.Y.Tick.Marker = wholeTicks{}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}

func plotColor(i int) color.Color {
	palette := []color.Color{color.Black, color.RGBA{G: 140, A: 255}, color.RGBA{R: 140, B: 140, A: 255}}
	return palette[i%len(palette)]
}

// wholeTicks labels ticks as whole numbers: counts of writes, slices and changes.
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', 0, 64)
		}
	}
	return ticks
}
