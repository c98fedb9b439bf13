// Package plot draws the project's charts with gonum.org/v1/plot: line and
// scatter charts on linear or logarithmic axes (Chart) and spike rasters of
// recorded against predicted trains (Raster), each as SVG or PNG, with a
// title, labelled axes (callers put units in the labels) and a legend beside
// the plot area.
package plot

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one named set of (X[i], Y[i]) points. Points that are NaN or
// infinite in either coordinate are skipped; a line is broken at them.
type Series struct {
	// Name is shown in the legend.
	Name string
	// X and Y are the coordinates; they must have the same length.
	X, Y []float64
	// Points draws a marker per point instead of a connecting line.
	Points bool
}

// Chart is a titled chart of one or more series on shared axes.
type Chart struct {
	// Title is drawn above the plot area; XLabel and YLabel label the axes
	// and should name the unit, e.g. "latency (ms)".
	Title, XLabel, YLabel string
	// LogX and LogY make the axis logarithmic (base 10); every drawn value
	// on such an axis must then be positive.
	LogX, LogY bool
	// Series are drawn in order, each in its own colour.
	Series []Series
	// XNames, when set, makes the x axis nominal: XNames[i] labels x = i,
	// the axis spans -0.5 to len(XNames)-0.5 and has no other ticks.
	XNames []string
}

// Size of a chart: 720 x 450 points, written as SVG user units (so nested
// SVG documents tile on a 720 x 450 grid) and as PNG at PNGDPI.
const (
	Width  vg.Length = 720
	Height vg.Length = 450
	// PNGDPI is the resolution of PNG output: 1440 x 900 pixels per chart.
	PNGDPI = 144
)

// palette holds distinct colours (Tableau 10), cycled when there are more
// series than colours.
var palette = [...]color.NRGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// Colour returns the colour of series i.
func Colour(i int) color.NRGBA { return palette[i%len(palette)] }

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// check validates the chart: series present, equal lengths, some finite
// point, positive values on log axes.
func (c *Chart) check() error {
	if len(c.Series) == 0 {
		return errors.New("plot: chart has no series")
	}
	n := 0
	for si, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plot: series %d (%q): %d x values but %d y values", si, s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			x, y := s.X[i], s.Y[i]
			if !finite(x) || !finite(y) {
				continue
			}
			if c.LogX && x <= 0 {
				return fmt.Errorf("plot: series %d (%q): x[%d] = %g is not positive on a log x axis", si, s.Name, i, x)
			}
			if c.LogY && y <= 0 {
				return fmt.Errorf("plot: series %d (%q): y[%d] = %g is not positive on a log y axis", si, s.Name, i, y)
			}
			n++
		}
	}
	if n == 0 {
		return errors.New("plot: chart has no finite points")
	}
	return nil
}

// segments splits a series at non-finite points into runs of finite ones.
func segments(s Series) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for i := range s.X {
		if !finite(s.X[i]) || !finite(s.Y[i]) {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: s.X[i], Y: s.Y[i]})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// Plot builds the gonum plot of the chart with its legend, for callers
// that compose several charts (e.g. with plot.Align).
func (c *Chart) Plot() (*plot.Plot, error) {
	p, _, err := c.build()
	return p, err
}

// build returns the chart's plot and its legend entries.
func (c *Chart) build() (*plot.Plot, []string, error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	var names []string
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text, p.Y.Label.Text = c.XLabel, c.YLabel
	p.Add(plotter.NewGrid())
	if c.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if c.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	for si, s := range c.Series {
		col := Colour(si)
		var thumb plot.Thumbnailer
		for _, seg := range segments(s) {
			if s.Points {
				sc, err := plotter.NewScatter(seg)
				if err != nil {
					return nil, nil, fmt.Errorf("plot: series %q: %w", s.Name, err)
				}
				sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
				p.Add(sc)
				thumb = sc
				continue
			}
			l, err := plotter.NewLine(seg)
			if err != nil {
				return nil, nil, fmt.Errorf("plot: series %q: %w", s.Name, err)
			}
			l.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1.5)}
			p.Add(l)
			thumb = l
		}
		if thumb != nil && s.Name != "" {
			p.Legend.Add(s.Name, thumb)
			names = append(names, s.Name)
		}
	}
	padAxis(&p.X, c.LogX)
	padAxis(&p.Y, c.LogY)
	if len(c.XNames) > 0 {
		p.NominalX(c.XNames...)
		p.X.Min, p.X.Max = -0.5, float64(len(c.XNames))-0.5
	}
	return p, names, nil
}

// padAxis widens an axis by 3% of its range on each side (in log units on
// a log axis), and a degenerate range to +-10%, so no point sits on the frame.
func padAxis(a *plot.Axis, log bool) {
	lo, hi := a.Min, a.Max
	if log {
		lo, hi = math.Log10(lo), math.Log10(hi)
	}
	d := (hi - lo) * 0.03
	if d == 0 {
		d = math.Abs(lo) * 0.1
		if d == 0 {
			d = 1
		}
		if log {
			d = 0.1
		}
	}
	lo, hi = lo-d, hi+d
	if log {
		lo, hi = math.Pow(10, lo), math.Pow(10, hi)
	}
	a.Min, a.Max = lo, hi
}

// logTicks labels every decade of a log axis (and 2x and 5x each decade
// when the range spans fewer than three), and falls back to round linear
// values when that gives fewer than two ticks.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	lo, hi := math.Floor(math.Log10(min)), math.Ceil(math.Log10(max))
	mult := []float64{1}
	if hi-lo < 3 {
		mult = []float64{1, 2, 5}
	}
	var out []plot.Tick
	for e := lo; e <= hi; e++ {
		for _, m := range mult {
			if v := m * math.Pow(10, e); v >= min*(1-1e-9) && v <= max*(1+1e-9) {
				out = append(out, plot.Tick{Value: v, Label: label(v)})
			}
		}
	}
	if len(out) >= 2 {
		return out
	}
	out = out[:0]
	for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
		if t.Value > 0 {
			out = append(out, t)
		}
	}
	return out
}

// label formats a tick value compactly.
func label(v float64) string {
	a := math.Abs(v)
	if a >= 1e5 || a < 1e-3 {
		return fmt.Sprintf("%.3g", v)
	}
	return fmt.Sprintf("%g", v)
}

// drawer is what Chart and Raster draw onto a canvas: a plot and the
// texts of its legend entries.
type drawer interface {
	build() (*plot.Plot, []string, error)
}

// render draws p with its legend in a column to the right of the plot
// area, sized to the longest entry.
func render(dc draw.Canvas, p *plot.Plot, legend []string) {
	sans(p)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	lw := vg.Length(0)
	for _, name := range legend {
		lw = max(lw, p.Legend.TextStyle.Width(name))
	}
	if lw > 0 {
		lw += p.Legend.ThumbnailWidth + 2*p.Legend.Padding + 12
		lw = min(lw, (dc.Max.X-dc.Min.X)*0.45)
	}
	lg := p.Legend
	p.Legend = plot.NewLegend()          // drawn beside the plot instead of over it
	p.Draw(draw.Crop(dc, 6, -lw, 0, -4)) // a margin keeps the labels off the edge
	p.Legend = lg
	if lw > 0 {
		lg := draw.Crop(dc, dc.Max.X-dc.Min.X-lw, 0, 0, -p.Title.TextStyle.Height(p.Title.Text)-p.Title.Padding-8)
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.Draw(lg)
	}
}

// encode draws d in the given format ("svg" or "png") to w.
func encode(w io.Writer, d drawer, format string) error {
	p, legend, err := d.build()
	if err != nil {
		return err
	}
	return encodeCanvas(w, format, Width, Height, func(dc draw.Canvas) { render(dc, p, legend) })
}

// encodeCanvas writes a width x height drawing made by paint in the given
// format ("svg" or "png") to w.
func encodeCanvas(w io.Writer, format string, width, height vg.Length, paint func(draw.Canvas)) error {
	switch format {
	case "svg":
		c := vgsvg.New(width, height)
		paint(draw.New(c))
		var buf bytes.Buffer
		if _, err := c.WriteTo(&buf); err != nil {
			return fmt.Errorf("plot: svg: %w", err)
		}
		_, err := w.Write(bareSVG(buf.Bytes()))
		return err
	case "png":
		c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(PNGDPI), vgimg.UseBackgroundColor(color.White))
		paint(draw.New(c))
		if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
			return fmt.Errorf("plot: png: %w", err)
		}
		return nil
	}
	return fmt.Errorf("plot: unknown format %q (want svg or png)", format)
}

// Grid is several charts in rows of Cols, each chart Width x Height.
type Grid struct {
	// Cols is the number of charts per row (at least 1).
	Cols int
	// Charts are placed left to right, top to bottom.
	Charts []Chart
}

// encode draws the grid in the given format to w.
func (g *Grid) encode(w io.Writer, format string) error {
	if g.Cols < 1 || len(g.Charts) == 0 {
		return fmt.Errorf("plot: grid of %d charts in %d columns", len(g.Charts), g.Cols)
	}
	type built struct {
		p      *plot.Plot
		legend []string
	}
	bs := make([]built, len(g.Charts))
	for i := range g.Charts {
		p, legend, err := g.Charts[i].build()
		if err != nil {
			return fmt.Errorf("plot: grid chart %d (%q): %w", i, g.Charts[i].Title, err)
		}
		bs[i] = built{p, legend}
	}
	cols, rows := min(g.Cols, len(bs)), (len(bs)+g.Cols-1)/g.Cols
	width, height := vg.Length(cols)*Width, vg.Length(rows)*Height
	return encodeCanvas(w, format, width, height, func(dc draw.Canvas) {
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		for i, b := range bs {
			x, y := vg.Length(i%cols)*Width, vg.Length(i/cols)*Height
			render(draw.Crop(dc, x, x+Width-width, height-y-Height, -y), b.p, b.legend)
		}
	})
}

// WriteSVG writes the grid as a standalone SVG document.
func (g *Grid) WriteSVG(w io.Writer) error { return g.encode(w, "svg") }

// WritePNG writes the grid as a PNG image.
func (g *Grid) WritePNG(w io.Writer) error { return g.encode(w, "png") }

// Save writes the grid to path as SVG or PNG, following the extension.
func (g *Grid) Save(path string) error { return saveWith(path, g.encode) }

// bareSVG drops the XML declaration and comment before the root element
// and states the size in user units, so the document can be nested inside
// another SVG and tiles on a Width x Height grid.
func bareSVG(b []byte) []byte {
	if i := bytes.Index(b, []byte("<svg")); i > 0 {
		b = b[i:]
	}
	end := bytes.IndexByte(b, '>')
	if end < 0 {
		return b
	}
	head := strings.NewReplacer(`pt" height=`, `" height=`, `pt" viewBox=`, `" viewBox=`).Replace(string(b[:end]))
	return append([]byte(head), b[end:]...)
}

// save writes d to path in the format its extension names (.svg or .png).
func save(path string, d drawer) error {
	return saveWith(path, func(w io.Writer, format string) error { return encode(w, d, format) })
}

// saveWith writes to path what enc encodes in the format path's extension
// names (.svg or .png).
func saveWith(path string, enc func(w io.Writer, format string) error) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	var buf bytes.Buffer
	if err := enc(&buf, format); err != nil {
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	return nil
}

// WriteSVG writes the chart as a standalone SVG document. It fails on a chart
// without series or finite points, on series whose X and Y lengths differ,
// and on non-positive values on a logarithmic axis.
func (c *Chart) WriteSVG(w io.Writer) error { return encode(w, c, "svg") }

// WritePNG writes the chart as a PNG image (white background, PNGDPI).
func (c *Chart) WritePNG(w io.Writer) error { return encode(w, c, "png") }

// Save writes the chart to path (created or truncated) as SVG or PNG,
// following the extension (.svg or .png).
func (c *Chart) Save(path string) error { return save(path, c) }

// SaveSVG writes the chart to the file at path (created or truncated) as
// SVG, whatever its extension.
func (c *Chart) SaveSVG(path string) error {
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	return nil
}

// sans sets every text of p in the sans-serif variant of the default
// typeface.
func sans(p *plot.Plot) {
	for _, st := range []*draw.TextStyle{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		st.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.TextStyle.Font.Size, p.Y.Label.TextStyle.Font.Size = vg.Points(12), vg.Points(12)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
}

// Saver is a drawing that can be saved in the format a path's extension
// names: a Chart, a Raster or a Grid.
type Saver interface {
	Save(path string) error
}

// Paths returns the two files a plot named path is written to: path with
// its extension (.svg, .png or none) replaced by .svg and by .png. Any
// other extension is an error, so a mistyped name fails before the work.
func Paths(path string) (svg, png string, err error) {
	ext := filepath.Ext(path)
	switch strings.ToLower(ext) {
	case ".svg", ".png", "":
	default:
		return "", "", fmt.Errorf("plot %s: extension %q: want .svg, .png or none (both are written)", path, ext)
	}
	base := strings.TrimSuffix(path, ext)
	return base + ".svg", base + ".png", nil
}

// SaveBoth writes d as SVG and as PNG, the project's rule for every plot
// file: to the two Paths of path. It returns the files written.
func SaveBoth(d Saver, path string) ([]string, error) {
	svg, png, err := Paths(path)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{svg, png} {
		if err := d.Save(p); err != nil {
			return nil, err
		}
	}
	return []string{svg, png}, nil
}
