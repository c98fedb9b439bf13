package plot

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPathsAndSaveBoth(t *testing.T) {
	dir := t.TempDir()
	c := &Chart{Title: "t", XLabel: "x (s)", YLabel: "y (Hz)", Series: []Series{{Name: "one", X: []float64{0, 1}, Y: []float64{0, 1}}}}
	for _, tc := range []struct {
		path, svg, png, err string
	}{
		{"a.svg", "a.svg", "a.png", ""},
		{"a.png", "a.svg", "a.png", ""},
		{"a.PNG", "a.svg", "a.png", ""},
		{"a", "a.svg", "a.png", ""},
		{"run.v2", "", "", `extension ".v2"`},
		{"a.pdf", "", "", `extension ".pdf"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			path := filepath.Join(dir, tc.path)
			svg, pngPath, err := Paths(path)
			files, saveErr := SaveBoth(c, path)
			if tc.err != "" {
				if err == nil || saveErr == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Paths error %v, SaveBoth error %v; want %q", err, saveErr, tc.err)
				}
				return
			}
			want := []string{filepath.Join(dir, tc.svg), filepath.Join(dir, tc.png)}
			if err != nil || saveErr != nil || svg != want[0] || pngPath != want[1] || !slices.Equal(files, want) {
				t.Fatalf("Paths %q %q (%v), SaveBoth %q (%v); want %q", svg, pngPath, err, files, saveErr, want)
			}
			data, err := os.ReadFile(pngPath)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(bytes.NewReader(data)); err != nil {
				t.Errorf("%s: %v", pngPath, err)
			}
			if data, err = os.ReadFile(svg); err != nil {
				t.Fatal(err)
			}
			parseSVG(t, data)
		})
	}
	if _, err := SaveBoth(&Chart{}, filepath.Join(dir, "empty.svg")); err == nil {
		t.Error("SaveBoth of an empty chart succeeded")
	}
}

// TestNamedRaster: with Names, each predicted train has its own colour,
// legend entry and row label, and Count sees every drawn row and spike.
func TestNamedRaster(t *testing.T) {
	r := &Raster{From: 1, To: 3, Names: []string{"model a", "model b"},
		Cells: []RasterCell{
			{Name: "cell 13", Recorded: []float64{0.5, 1.2, 1.5}, Predicted: [][]float64{{1.1, 1.6}, {2.0}}},
			{Name: "cell 14", Recorded: []float64{2.5}, Predicted: [][]float64{{0.9, 2.4, math.NaN()}, nil}},
		}}
	var buf bytes.Buffer
	if err := r.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	hex := func(i int) string { c := Colour(i); return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }
	// In [1, 3]: model a 1.1, 1.6, 2.4 (3), model b 2.0 (1), plus a legend
	// line each; recorded 1.2, 1.5, 2.5 (3) and the legend's.
	for _, tc := range []struct {
		stroke string
		want   int
	}{{hex(0), 4}, {hex(1), 2}, {"#222222", 4}} {
		if got := doc.strokes[tc.stroke]; got != tc.want {
			t.Errorf("%d paths in %s, want %d", got, tc.stroke, tc.want)
		}
	}
	all := "|" + strings.Join(doc.texts, "|") + "|"
	if strings.Count(all, "|model a|") != 3 || strings.Count(all, "|model b|") != 3 || strings.Contains(all, "|predicted|") {
		t.Errorf("texts %q: want each name on both cells' rows and in the legend, no generic entry", all)
	}
	rows, spikes, err := r.Count()
	if err != nil || rows != 6 || spikes != 7 {
		t.Errorf("Count: %d rows, %d spikes (%v); want 6 and 7", rows, spikes, err)
	}
	r.Names = r.Names[:1]
	if err := r.WriteSVG(&buf); err == nil || !strings.Contains(err.Error(), "2 predicted trains but 1 names") {
		t.Errorf("more trains than names: %v", err)
	}
}

// TestGrid draws four charts in two columns, one with a nominal x axis:
// the PNG is two charts wide and tall, the SVG holds every chart's texts.
func TestGrid(t *testing.T) {
	g := &Grid{Cols: 2}
	for _, title := range []string{"one", "two", "three", "four"} {
		g.Charts = append(g.Charts, Chart{Title: title, XLabel: "model", YLabel: "v (ms)", XNames: []string{"alpha", "beta"},
			Series: []Series{{Name: "IQM", X: []float64{0, 1}, Y: []float64{1, 2}, Points: true}}})
	}
	var buf bytes.Buffer
	if err := g.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 2*1440 || b.Dy() != 2*900 {
		t.Errorf("PNG %d x %d, want 2880 x 1800", b.Dx(), b.Dy())
	}
	buf.Reset()
	if err := g.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	all := "|" + strings.Join(parseSVG(t, buf.Bytes()).texts, "|") + "|"
	for _, want := range []string{"|one|", "|two|", "|three|", "|four|", "|alpha|", "|beta|", "|v (ms)|"} {
		if !strings.Contains(all, want) {
			t.Errorf("text %q missing from %q", want, all)
		}
	}
	for _, bad := range []*Grid{{Cols: 0, Charts: g.Charts}, {Cols: 2}, {Cols: 1, Charts: []Chart{{}}}} {
		if err := bad.WriteSVG(&buf); err == nil {
			t.Errorf("grid %+v drew", bad)
		}
	}
}
