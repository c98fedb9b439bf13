package experiment

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"rgcpred/evaluation"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure geometry: a 2 x 2 grid of panels, one per metric.
const (
	figWidth  = 11 * vg.Inch
	figHeight = 8.5 * vg.Inch
	figDPI    = 150
)

// Figure colours: configurations, their seeds, baselines.
var (
	colModel    = color.NRGBA{R: 31, G: 119, B: 180, A: 255}
	colSeed     = color.NRGBA{R: 31, G: 119, B: 180, A: 140}
	colBaseline = color.NRGBA{R: 120, G: 120, B: 120, A: 255}
)

// WriteFigure draws the paper's figure from the results: one panel per
// metric with the models side by side, each a point at its IQM over cells
// with its 95% bootstrap interval as an error bar (configurations in blue,
// with each seed's own IQM as a small hollow point beside it; baselines in
// grey). The format follows path's extension: .png or .svg.
func WriteFigure(path string, r *Results) error {
	plots := make([][]*plot.Plot, 2)
	for i, name := range evaluation.MetricNames {
		p, err := metricPanel(r, name)
		if err != nil {
			return fmt.Errorf("figure %s: %w", path, err)
		}
		plots[i/2] = append(plots[i/2], p)
	}
	var (
		canvas vg.CanvasWriterTo
		dc     draw.Canvas
	)
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png":
		c := vgimg.NewWith(vgimg.UseWH(figWidth, figHeight), vgimg.UseDPI(figDPI))
		canvas, dc = vgimg.PngCanvas{Canvas: c}, draw.New(c)
	case ".svg":
		c := vgsvg.New(figWidth, figHeight)
		canvas, dc = c, draw.New(c)
	default:
		return fmt.Errorf("figure %s: format %q: want .png or .svg", path, ext)
	}
	// A white background (SVG viewers show transparency as they like).
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	title := fmt.Sprintf("%s, %s split, %d cells; %s per run", r.Recording, r.Split, len(r.CellIDs), r.Budget)
	sub := "points: IQM over cells of the seed-averaged scores; bars: 95% bootstrap CI; rings: each seed's IQM; grey: baselines"
	sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 13), XAlign: draw.XCenter,
		YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	dc.FillText(sty, vg.Point{X: figWidth / 2, Y: figHeight - 0.12*vg.Inch}, title)
	sty.Font = font.From(plot.DefaultFont, 10)
	dc.FillText(sty, vg.Point{X: figWidth / 2, Y: figHeight - 0.4*vg.Inch}, sub)

	tiles := draw.Tiles{Rows: 2, Cols: 2, PadTop: 0.7 * vg.Inch, PadBottom: 0.1 * vg.Inch,
		PadLeft: 0.1 * vg.Inch, PadRight: 0.2 * vg.Inch, PadX: 0.4 * vg.Inch, PadY: 0.3 * vg.Inch}
	cs := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			p.Draw(cs[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("figure: %w", err)
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("figure %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("figure %s: %w", path, err)
	}
	return nil
}

// intervals are points with asymmetric vertical error bars, for
// plotter.NewYErrorBars.
type intervals struct {
	plotter.XYs
	lo, hi []float64
}

// YError returns the distances from the point to the interval's ends.
func (v intervals) YError(i int) (float64, float64) { return v.lo[i], v.hi[i] }

// metricPanel draws one metric's panel.
func metricPanel(r *Results, metric string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = evaluation.MetricTitles[metric]
	p.Y.Label.Text = "IQM over cells"
	if metric == "nll" {
		p.Y.Label.Text += " (nats)" // the spike-train metrics are dimensionless
	}
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Add(plotter.NewGrid())
	names := make([]string, len(r.Models))
	groups := map[bool]*intervals{true: {}, false: {}}
	var seeds plotter.XYs
	for i, m := range r.Models {
		names[i] = m.Name
		s := m.Summary[metric]
		g := groups[m.Kind == "config"]
		g.XYs = append(g.XYs, plotter.XY{X: float64(i), Y: s.IQM})
		g.lo = append(g.lo, s.IQM-s.Lo)
		g.hi = append(g.hi, s.Hi-s.IQM)
		for k, run := range m.Runs {
			off := 0.12 + 0.06*float64(k)
			seeds = append(seeds, plotter.XY{X: float64(i) + off, Y: run.Summary[metric].IQM})
		}
	}
	p.NominalX(names...)
	for _, isConfig := range []bool{true, false} {
		g := groups[isConfig]
		if len(g.XYs) == 0 {
			continue
		}
		col := colBaseline
		if isConfig {
			col = colModel
		}
		bars, err := plotter.NewYErrorBars(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", metric, err)
		}
		bars.LineStyle.Color, bars.LineStyle.Width = col, vg.Points(1.5)
		pts, err := plotter.NewScatter(g.XYs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", metric, err)
		}
		pts.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
		p.Add(bars, pts)
	}
	if len(seeds) > 0 {
		sp, err := plotter.NewScatter(seeds)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", metric, err)
		}
		sp.GlyphStyle = draw.GlyphStyle{Color: colSeed, Radius: vg.Points(2), Shape: draw.RingGlyph{}}
		p.Add(sp)
	}
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	return p, nil
}
