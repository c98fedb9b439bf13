// Package plot writes small line and scatter charts as standalone SVG files,
// with no dependencies beyond the standard library: axes with ticks and
// labels, optional logarithmic axes, a legend and one colour per series.
package plot

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
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
	// Title is drawn above the plot area; XLabel and YLabel label the axes.
	Title, XLabel, YLabel string
	// LogX and LogY make the axis logarithmic (base 10); every drawn value
	// on such an axis must then be positive.
	LogX, LogY bool
	// Series are drawn in order, each in its own colour.
	Series []Series
}

// palette holds distinct colours (Tableau 10), cycled when there are more
// series than colours.
var palette = [...]string{
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
}

// Geometry of the drawing, in SVG user units.
const (
	width      = 720.0
	height     = 450.0
	marginL    = 80.0
	marginR    = 170.0
	marginT    = 40.0
	marginB    = 60.0
	plotW      = width - marginL - marginR
	plotH      = height - marginT - marginB
	markerR    = 2.5
	legendLine = 18.0
)

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// axis maps data values to pixel offsets along one axis.
type axis struct {
	log    bool
	lo, hi float64 // in transformed units (log10 when log)
}

func (a axis) tr(v float64) float64 {
	if a.log {
		return math.Log10(v)
	}
	return v
}

// frac returns the position of v in [0, 1] along the axis.
func (a axis) frac(v float64) float64 { return (a.tr(v) - a.lo) / (a.hi - a.lo) }

// check validates the chart and returns the axis ranges.
func (c *Chart) check() (ax, ay axis, err error) {
	ax.log, ay.log = c.LogX, c.LogY
	if len(c.Series) == 0 {
		return ax, ay, errors.New("plot: chart has no series")
	}
	minX, maxX := math.Inf(1), math.Inf(-1)
	minY, maxY := math.Inf(1), math.Inf(-1)
	n := 0
	for si, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return ax, ay, fmt.Errorf("plot: series %d (%q): %d x values but %d y values", si, s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			x, y := s.X[i], s.Y[i]
			if !finite(x) || !finite(y) {
				continue
			}
			if c.LogX && x <= 0 {
				return ax, ay, fmt.Errorf("plot: series %d (%q): x[%d] = %g is not positive on a log x axis", si, s.Name, i, x)
			}
			if c.LogY && y <= 0 {
				return ax, ay, fmt.Errorf("plot: series %d (%q): y[%d] = %g is not positive on a log y axis", si, s.Name, i, y)
			}
			tx, ty := ax.tr(x), ay.tr(y)
			minX, maxX = math.Min(minX, tx), math.Max(maxX, tx)
			minY, maxY = math.Min(minY, ty), math.Max(maxY, ty)
			n++
		}
	}
	if n == 0 {
		return ax, ay, errors.New("plot: chart has no finite points")
	}
	ax.lo, ax.hi = pad(minX, maxX)
	ay.lo, ay.hi = pad(minY, maxY)
	return ax, ay, nil
}

// pad widens a degenerate range and adds a small margin.
func pad(lo, hi float64) (float64, float64) {
	if hi == lo {
		d := math.Abs(lo) * 0.1
		if d == 0 {
			d = 1
		}
		return lo - d, hi + d
	}
	d := (hi - lo) * 0.03
	return lo - d, hi + d
}

// ticks returns tick values (in data units) for an axis.
func ticks(a axis) []float64 {
	if a.log {
		var out []float64
		for e := math.Floor(a.lo); e <= math.Ceil(a.hi); e++ {
			if e >= a.lo && e <= a.hi {
				out = append(out, math.Pow(10, e))
			}
		}
		if len(out) >= 2 {
			return out
		}
		// Less than two decades: fall back to linear ticks in data units.
		lin := niceTicks(math.Pow(10, a.lo), math.Pow(10, a.hi))
		out = out[:0]
		for _, v := range lin {
			if v > 0 {
				out = append(out, v)
			}
		}
		return out
	}
	return niceTicks(a.lo, a.hi)
}

// niceTicks returns about five round values between lo and hi.
func niceTicks(lo, hi float64) []float64 {
	span := hi - lo
	if !(span > 0) || !finite(span) {
		return []float64{lo}
	}
	raw := span / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		step = m * mag
		if step >= raw {
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		out = append(out, v)
		if len(out) > 50 {
			break
		}
	}
	return out
}

// label formats a tick value compactly.
func label(v float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	if a >= 1e5 || a < 1e-3 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func esc(s string) string { return html.EscapeString(s) }

// WriteSVG writes the chart as a standalone SVG document. It fails on a chart
// without series or finite points, on series whose X and Y lengths differ,
// and on non-positive values on a logarithmic axis.
func (c *Chart) WriteSVG(w io.Writer) error {
	ax, ay, err := c.check()
	if err != nil {
		return err
	}
	px := func(x float64) float64 { return marginL + ax.frac(x)*plotW }
	py := func(y float64) float64 { return marginT + (1-ay.frac(y))*plotH }

	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		int(width), int(height), int(width), int(height))
	fmt.Fprintf(b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", int(width), int(height))
	if c.Title != "" {
		fmt.Fprintf(b, `<text x="%s" y="24" text-anchor="middle" font-size="15">%s</text>`+"\n", num(marginL+plotW/2), esc(c.Title))
	}
	// Grid, ticks and tick labels.
	fmt.Fprintln(b, `<g class="axes" stroke="#000" stroke-width="1">`)
	for _, v := range ticks(ax) {
		x := px(v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", num(x), num(marginT), num(x), num(marginT+plotH))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(x), num(marginT+plotH), num(x), num(marginT+plotH+5))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" stroke="none">%s</text>`+"\n", num(x), num(marginT+plotH+18), esc(label(v)))
	}
	for _, v := range ticks(ay) {
		y := py(v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", num(marginL), num(y), num(marginL+plotW), num(y))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(marginL-5), num(y), num(marginL), num(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" stroke="none">%s</text>`+"\n", num(marginL-8), num(y+4), esc(label(v)))
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none"/>`+"\n", num(marginL), num(marginT), num(plotW), num(plotH))
	fmt.Fprintln(b, `</g>`)
	if c.XLabel != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(marginL+plotW/2), num(height-15), esc(c.XLabel))
	}
	if c.YLabel != "" {
		fmt.Fprintf(b, `<text x="20" y="%s" text-anchor="middle" transform="rotate(-90 20 %s)">%s</text>`+"\n", num(marginT+plotH/2), num(marginT+plotH/2), esc(c.YLabel))
	}
	// Series.
	for si, s := range c.Series {
		col := palette[si%len(palette)]
		fmt.Fprintf(b, `<g class="series" data-name="%s">`+"\n", esc(s.Name))
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", col, strings.Join(pts, " "))
				pts = pts[:0]
			}
		}
		for i := range s.X {
			x, y := s.X[i], s.Y[i]
			if !finite(x) || !finite(y) {
				flush()
				continue
			}
			if s.Points {
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", num(px(x)), num(py(y)), num(markerR), col)
				continue
			}
			pts = append(pts, num(px(x))+","+num(py(y)))
		}
		flush()
		fmt.Fprintln(b, `</g>`)
	}
	// Legend.
	fmt.Fprintln(b, `<g class="legend">`)
	lx := marginL + plotW + 15
	for si, s := range c.Series {
		col := palette[si%len(palette)]
		y := marginT + 10 + float64(si)*legendLine
		if s.Points {
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="4" fill="%s"/>`+"\n", num(lx+10), num(y), col)
		} else {
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`+"\n", num(lx), num(y), num(lx+20), num(y), col)
		}
		fmt.Fprintf(b, `<text x="%s" y="%s">%s</text>`+"\n", num(lx+26), num(y+4), esc(s.Name))
	}
	fmt.Fprintln(b, `</g>`)
	fmt.Fprintln(b, `</svg>`)
	return b.Flush()
}

// SaveSVG writes the chart to the file at path (created or truncated).
func (c *Chart) SaveSVG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	if err := c.WriteSVG(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	return nil
}
