package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// RasterCell is one cell's recorded spike train and one or more predicted
// trains (e.g. several rollouts of a model), as spike times.
type RasterCell struct {
	// Name labels the cell's row, e.g. "cell 13".
	Name string
	// Recorded holds the recorded spike times.
	Recorded []float64
	// Predicted holds each predicted train's spike times.
	Predicted [][]float64
}

// Raster is a spike raster: for each cell, a row of recorded spikes (dark
// ticks) above its predicted trains (coloured ticks, one line per train),
// over a common time axis.
type Raster struct {
	// Title is drawn above the plot; XLabel labels the time axis with its
	// unit (default "time (s)").
	Title, XLabel string
	// From and To bound the time axis; spikes outside are not drawn. When
	// both are 0 the axis spans the spikes.
	From, To float64
	// Cells are drawn top to bottom.
	Cells []RasterCell
	// Names, when set, names the predicted trains by index (Names[j] is
	// every cell's Predicted[j], e.g. a model): each then gets its own
	// colour (Colour(j)), its own legend entry and its own row label.
	Names []string
}

// Raster colours: recorded spikes near-black, predicted in the palette's red.
var (
	RecordedColour  = color.NRGBA{0x22, 0x22, 0x22, 0xff}
	PredictedColour = palette[3]
)

// check validates the raster and returns its time range.
func (r *Raster) check() (lo, hi float64, err error) {
	if len(r.Cells) == 0 {
		return 0, 0, errors.New("plot: raster has no cells")
	}
	if !finite(r.From) || !finite(r.To) {
		return 0, 0, fmt.Errorf("plot: raster time range [%g, %g] is not finite", r.From, r.To)
	}
	if r.From != 0 || r.To != 0 {
		if !(r.To > r.From) {
			return 0, 0, fmt.Errorf("plot: raster time range [%g, %g] is empty", r.From, r.To)
		}
		return r.From, r.To, nil
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	see := func(ts []float64) {
		for _, t := range ts {
			if finite(t) {
				lo, hi = math.Min(lo, t), math.Max(hi, t)
			}
		}
	}
	for _, c := range r.Cells {
		see(c.Recorded)
		for _, p := range c.Predicted {
			see(p)
		}
	}
	if lo > hi {
		return 0, 0, errors.New("plot: raster has no spikes and no time range")
	}
	if lo == hi {
		lo, hi = lo-0.5, hi+0.5
	}
	return lo, hi, nil
}

// rasterRows draws spike ticks: each row is a train drawn as vertical
// strokes between y0 and y1 (data units).
type rasterRows struct {
	rows   []rasterRow
	lo, hi float64 // time range
	n      int     // cells
}

type rasterRow struct {
	times  []float64
	y0, y1 float64
	style  draw.LineStyle
}

// Plot implements plot.Plotter.
func (rr *rasterRows) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sep := draw.LineStyle{Color: color.Gray{0xcc}, Width: vg.Points(0.5)}
	for i := 1; i < rr.n; i++ {
		y := trY(float64(i))
		c.StrokeLine2(sep, trX(rr.lo), y, trX(rr.hi), y)
	}
	for _, row := range rr.rows {
		y0, y1 := trY(row.y0), trY(row.y1)
		for _, t := range row.times {
			if !finite(t) || t < rr.lo || t > rr.hi {
				continue
			}
			x := trX(t)
			c.StrokeLine2(row.style, x, y0, x, y1)
		}
	}
}

// DataRange implements plot.DataRanger.
func (rr *rasterRows) DataRange() (xmin, xmax, ymin, ymax float64) {
	return rr.lo, rr.hi, 0, float64(rr.n)
}

// Count returns the rows the raster draws (each cell's recorded train and
// its predicted trains) and the spikes it draws on them (those inside the
// time range).
func (r *Raster) Count() (rows, spikes int, err error) {
	lo, hi, err := r.check()
	if err != nil {
		return 0, 0, err
	}
	in := func(ts []float64) {
		rows++
		for _, t := range ts {
			if finite(t) && t >= lo && t <= hi {
				spikes++
			}
		}
	}
	for _, c := range r.Cells {
		in(c.Recorded)
		for _, p := range c.Predicted {
			in(p)
		}
	}
	return rows, spikes, nil
}

// predictedStyle is the line style of predicted train j.
func (r *Raster) predictedStyle(j int) draw.LineStyle {
	if len(r.Names) > 0 {
		return draw.LineStyle{Color: Colour(j), Width: vg.Points(1)}
	}
	return draw.LineStyle{Color: PredictedColour, Width: vg.Points(1)}
}

func (r *Raster) build() (*plot.Plot, []string, error) {
	lo, hi, err := r.check()
	if err != nil {
		return nil, nil, err
	}
	for i, c := range r.Cells {
		if len(r.Names) > 0 && len(c.Predicted) > len(r.Names) {
			return nil, nil, fmt.Errorf("plot: raster cell %d (%q): %d predicted trains but %d names", i, c.Name, len(c.Predicted), len(r.Names))
		}
	}
	p := plot.New()
	p.Title.Text = r.Title
	p.X.Label.Text = r.XLabel
	if p.X.Label.Text == "" {
		p.X.Label.Text = "time (s)"
	}
	p.X.Min, p.X.Max = lo, hi
	n := len(r.Cells)
	rec := draw.LineStyle{Color: RecordedColour, Width: vg.Points(1)}
	rr := &rasterRows{lo: lo, hi: hi, n: n}
	var ticks []plot.Tick
	for i, c := range r.Cells {
		base := float64(n - 1 - i) // first cell on top
		k := len(c.Predicted)
		if len(r.Names) == 0 {
			rr.rows = append(rr.rows, rasterRow{times: c.Recorded, y0: base + 0.55, y1: base + 0.92, style: rec})
			ticks = append(ticks, plot.Tick{Value: base + 0.5, Label: c.Name})
			if k > 0 {
				h := 0.43 / float64(k)
				for j, tr := range c.Predicted {
					top := base + 0.5 - float64(j)*h
					rr.rows = append(rr.rows, rasterRow{times: tr, y0: top - 0.85*h, y1: top, style: r.predictedStyle(j)})
				}
			}
			continue
		}
		// Named trains: k+1 equal rows per cell, each labelled, the cell's
		// name on its recorded row.
		h := 0.9 / float64(k+1)
		for j := 0; j <= k; j++ {
			top := base + 0.95 - float64(j)*h
			row, label := rasterRow{y0: top - 0.8*h, y1: top, style: rec}, c.Name
			if j == 0 {
				row.times = c.Recorded
			} else {
				row.times, row.style, label = c.Predicted[j-1], r.predictedStyle(j-1), r.Names[j-1]
			}
			rr.rows = append(rr.rows, row)
			ticks = append(ticks, plot.Tick{Value: top - 0.4*h, Label: label})
		}
	}
	p.Add(rr)
	p.Y.Min, p.Y.Max = 0, float64(n)
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Length = 0
	legend := []string{"recorded"}
	p.Legend.Add("recorded", &plotter.Line{LineStyle: draw.LineStyle{Color: RecordedColour, Width: vg.Points(2)}})
	if len(r.Names) == 0 {
		legend = append(legend, "predicted")
		p.Legend.Add("predicted", &plotter.Line{LineStyle: draw.LineStyle{Color: PredictedColour, Width: vg.Points(2)}})
	}
	for j, name := range r.Names {
		st := r.predictedStyle(j)
		st.Width = vg.Points(2)
		legend = append(legend, name)
		p.Legend.Add(name, &plotter.Line{LineStyle: st})
	}
	return p, legend, nil
}

// WriteSVG writes the raster as a standalone SVG document. It fails on a
// raster without cells, with an empty or non-finite time range, or with
// neither spikes nor a range.
func (r *Raster) WriteSVG(w io.Writer) error { return encode(w, r, "svg") }

// WritePNG writes the raster as a PNG image.
func (r *Raster) WritePNG(w io.Writer) error { return encode(w, r, "png") }

// Save writes the raster to path as SVG or PNG, following the extension.
func (r *Raster) Save(path string) error { return save(path, r) }
