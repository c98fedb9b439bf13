package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// svgDoc is what the tests read back from an SVG document.
type svgDoc struct {
	root    xml.StartElement
	texts   []string
	strokes map[string]int // paths per stroke colour (upper-case hex)
	fills   map[string]int // paths per fill colour
}

func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	doc := svgDoc{strokes: map[string]int{}, fills: map[string]int{}}
	d := xml.NewDecoder(bytes.NewReader(data))
	inText, rootSeen := false, false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("output is not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if !rootSeen {
				if e.Name.Local != "svg" {
					t.Fatalf("root element %q, want svg", e.Name.Local)
				}
				doc.root, rootSeen = e, true
			}
			switch e.Name.Local {
			case "text":
				inText = true
			case "path":
				for _, a := range e.Attr {
					if a.Name.Local != "style" {
						continue
					}
					for _, kv := range strings.Split(a.Value, ";") {
						if c, ok := strings.CutPrefix(kv, "stroke:"); ok {
							doc.strokes[strings.ToUpper(c)]++
						}
						if c, ok := strings.CutPrefix(kv, "fill:"); ok {
							doc.fills[strings.ToUpper(c)]++
						}
					}
				}
			}
		case xml.EndElement:
			if e.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				doc.texts = append(doc.texts, string(e))
			}
		}
	}
	if !rootSeen {
		t.Fatal("no svg root")
	}
	return doc
}

func (d svgDoc) attr(name string) string {
	for _, a := range d.root.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func hex(i int) string {
	c := Colour(i)
	return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B)
}

func TestChartSVG(t *testing.T) {
	c := &Chart{
		Title: "loss <&> curve", XLabel: "step", YLabel: "loss (nats)",
		Series: []Series{
			{Name: "train", X: []float64{0, 1, 2, 3}, Y: []float64{4, 3, 2, 1}},
			{Name: "val", X: []float64{0, 1, 2, 3, 4}, Y: []float64{4, math.NaN(), 2, 1.5, 1}},
			{Name: "scatter", X: []float64{0.5, 1.5, math.Inf(1)}, Y: []float64{2, 3, 1}, Points: true},
		},
	}
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("<svg ")) {
		t.Fatalf("document starts %q, want the bare <svg root (nestable)", buf.Bytes()[:20])
	}
	doc := parseSVG(t, buf.Bytes())
	if doc.attr("width") != "720" || doc.attr("height") != "450" {
		t.Errorf("size %s x %s, want 720 x 450 user units", doc.attr("width"), doc.attr("height"))
	}
	all := "|" + strings.Join(doc.texts, "|") + "|"
	for _, want := range []string{"|loss <&> curve|", "|step|", "|loss (nats)|", "|train|", "|val|", "|scatter|"} {
		if !strings.Contains(all, want) {
			t.Errorf("text %q missing from %q", want, all)
		}
	}
	// Lines: train is one path, val is broken at its NaN into a 1-point and a
	// 3-point run; each
	// series also has one legend thumbnail. The scatter draws a marker per
	// finite point (2) plus its legend marker.
	cases := []struct {
		what string
		got  int
		want int
	}{
		{"train paths", doc.strokes[hex(0)], 2},
		{"val paths", doc.strokes[hex(1)], 2}, // its one-point run before the NaN draws no path
		{"scatter markers", doc.fills[hex(2)], 3},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, tc.got, tc.want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	cases := []struct {
		min, max float64
		want     string
	}{
		{1, 1000, "1,10,100,1000"},
		{0.15, 6, "0.2,0.5,1,2,5"},
		{1e-3, 1e4, "0.001,0.01,0.1,1,10,100,1000,10000"},
	}
	for _, tc := range cases {
		var got []string
		for _, tk := range (logTicks{}).Ticks(tc.min, tc.max) {
			got = append(got, tk.Label)
		}
		if s := strings.Join(got, ","); s != tc.want {
			t.Errorf("ticks [%g, %g] = %s, want %s", tc.min, tc.max, s, tc.want)
		}
	}
	c := &Chart{LogX: true, LogY: true, XLabel: "cells", YLabel: "latency (ms)", Series: []Series{{Name: "p", X: []float64{1, 10, 100, 1000}, Y: []float64{1e-3, 1e-2, 1e-1, 1}}}}
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	all := "|" + strings.Join(parseSVG(t, buf.Bytes()).texts, "|") + "|"
	for _, want := range []string{"|1|", "|10|", "|100|", "|1000|", "|0.001|", "|0.01|"} {
		if !strings.Contains(all, want) {
			t.Errorf("tick %q missing from %q", want, all)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		c    Chart
		want string
	}{
		{"empty", Chart{}, "no series"},
		{"all NaN", Chart{Series: []Series{{X: []float64{math.NaN()}, Y: []float64{1}}}}, "no finite points"},
		{"length mismatch", Chart{Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1}}}}, "2 x values but 1 y values"},
		{"log x zero", Chart{LogX: true, Series: []Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1, 2}}}}, "not positive on a log x axis"},
		{"log y negative", Chart{LogY: true, Series: []Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1, -2}}}}, "not positive on a log y axis"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, write := range []func(io.Writer) error{tc.c.WriteSVG, tc.c.WritePNG} {
				err := write(io.Discard)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want containing %q", err, tc.want)
				}
			}
		})
	}
}

// colourPixels counts the pixels of img within 30 (per channel) of c.
func colourPixels(img image.Image, c [3]uint8) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if absDiff(uint8(r>>8), c[0]) < 30 && absDiff(uint8(g>>8), c[1]) < 30 && absDiff(uint8(bl>>8), c[2]) < 30 {
				n++
			}
		}
	}
	return n
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

func TestSavePNGAndSVG(t *testing.T) {
	dir := t.TempDir()
	c := &Chart{Title: "t", XLabel: "x (s)", YLabel: "y (Hz)", Series: []Series{
		{Name: "one", X: []float64{0, 1}, Y: []float64{0, 1}},
		{Name: "two", X: []float64{5}, Y: []float64{5}, Points: true},
	}}
	for _, name := range []string{"c.png", "c.svg", "c.SVG"} {
		if err := c.Save(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "c.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1440 || b.Dy() != 900 {
		t.Errorf("PNG is %d x %d, want 1440 x 900", b.Dx(), b.Dy())
	}
	if n := colourPixels(img, [3]uint8{0x1f, 0x77, 0xb4}); n < 200 {
		t.Errorf("%d pixels of the first series' colour, want a drawn line (>= 200)", n)
	}
	if n := colourPixels(img, [3]uint8{255, 255, 255}); n < 1440*900/2 {
		t.Errorf("%d white pixels: background not white", n)
	}
	if err := c.SaveSVG(filepath.Join(dir, "x.png")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "x.png"))
	parseSVG(t, data) // SaveSVG writes SVG whatever the extension
	if err := c.Save(filepath.Join(dir, "c.gif")); err == nil || !strings.Contains(err.Error(), "unknown format") {
		t.Errorf("Save .gif: %v", err)
	}
	if err := (&Chart{}).Save(filepath.Join(dir, "e.svg")); err == nil {
		t.Error("Save of an empty chart succeeded")
	}
}

func TestRaster(t *testing.T) {
	r := &Raster{
		Title: "cell 13 and 14", From: 1, To: 3,
		Cells: []RasterCell{
			{Name: "cell 13", Recorded: []float64{0.5, 1.2, 1.5, 2.9, 3.5}, Predicted: [][]float64{{1.1, 1.6}, {2.0}}},
			{Name: "cell 14", Recorded: []float64{2.5}, Predicted: [][]float64{{0.9, 2.4, math.NaN()}}},
		},
	}
	var buf bytes.Buffer
	if err := r.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	rec := fmt.Sprintf("#%02X%02X%02X", RecordedColour.R, RecordedColour.G, RecordedColour.B)
	pred := fmt.Sprintf("#%02X%02X%02X", PredictedColour.R, PredictedColour.G, PredictedColour.B)
	// In [1, 3]: recorded 1.2, 1.5, 2.9, 2.5 (4); predicted 1.1, 1.6, 2.0,
	// 2.4 (4); plus one legend line each.
	if doc.strokes[rec] != 5 || doc.strokes[pred] != 5 {
		t.Errorf("recorded ticks %d, predicted %d; want 4 + legend each", doc.strokes[rec]-1, doc.strokes[pred]-1)
	}
	all := "|" + strings.Join(doc.texts, "|") + "|"
	for _, want := range []string{"|cell 13|", "|cell 14|", "|recorded|", "|predicted|", "|time (s)|", "|cell 13 and 14|"} {
		if !strings.Contains(all, want) {
			t.Errorf("text %q missing from %q", want, all)
		}
	}
	// The whole range comes from the spikes when From and To are 0.
	r.From, r.To = 0, 0
	buf.Reset()
	if err := r.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	if d := parseSVG(t, buf.Bytes()); d.strokes[rec] != 6+1 || d.strokes[pred] != 5+1 {
		t.Errorf("full range: recorded %d, predicted %d paths, want 7 and 6", d.strokes[rec], d.strokes[pred])
	}
	if err := r.WritePNG(io.Discard); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		r    Raster
		want string
	}{
		{"no cells", Raster{}, "no cells"},
		{"empty range", Raster{From: 2, To: 1, Cells: r.Cells}, "is empty"},
		{"no spikes", Raster{Cells: []RasterCell{{Name: "a"}}}, "no spikes"},
		{"NaN range", Raster{From: math.NaN(), Cells: r.Cells}, "not finite"},
	}
	for _, tc := range bad {
		if err := tc.r.WriteSVG(io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
