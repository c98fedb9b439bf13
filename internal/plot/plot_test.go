package plot

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// svgStats is what the tests read back from a chart's SVG.
type svgStats struct {
	polylines [][][2]float64 // points of each polyline
	circles   int            // markers inside series groups
	colours   []string       // stroke colour of each polyline
	texts     []string
}

func parse(t *testing.T, data []byte) svgStats {
	t.Helper()
	var st svgStats
	d := xml.NewDecoder(bytes.NewReader(data))
	depthSeries := 0
	inText := false
	rootSeen := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("output is not well-formed XML: %v\n%s", err, data)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if !rootSeen {
				if e.Name.Local != "svg" {
					t.Fatalf("root element %q, want svg", e.Name.Local)
				}
				rootSeen = true
			}
			attr := func(n string) string {
				for _, a := range e.Attr {
					if a.Name.Local == n {
						return a.Value
					}
				}
				return ""
			}
			switch e.Name.Local {
			case "g":
				if attr("class") == "series" {
					depthSeries++
				}
			case "polyline":
				var pts [][2]float64
				for _, p := range strings.Fields(attr("points")) {
					xy := strings.Split(p, ",")
					if len(xy) != 2 {
						t.Fatalf("bad point %q", p)
					}
					x, err1 := strconv.ParseFloat(xy[0], 64)
					y, err2 := strconv.ParseFloat(xy[1], 64)
					if err1 != nil || err2 != nil {
						t.Fatalf("bad point %q", p)
					}
					pts = append(pts, [2]float64{x, y})
				}
				st.polylines = append(st.polylines, pts)
				st.colours = append(st.colours, attr("stroke"))
			case "circle":
				if depthSeries > 0 {
					st.circles++
				}
			case "text":
				inText = true
			}
		case xml.EndElement:
			if e.Name.Local == "g" && depthSeries > 0 {
				depthSeries = 0
			}
			if e.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				st.texts = append(st.texts, string(e))
			}
		}
	}
	if !rootSeen {
		t.Fatal("no svg root")
	}
	return st
}

func render(t *testing.T, c *Chart) svgStats {
	t.Helper()
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	return parse(t, buf.Bytes())
}

func TestLinesAndPoints(t *testing.T) {
	c := &Chart{
		Title: "loss <&> curve", XLabel: "step", YLabel: "loss",
		Series: []Series{
			{Name: "train", X: []float64{0, 1, 2, 3}, Y: []float64{4, 3, 2, 1}},
			{Name: "val", X: []float64{0, 1, 2, 3, 4}, Y: []float64{4, math.NaN(), 2, 1.5, 1}},
			{Name: "scatter", X: []float64{0.5, 1.5, math.Inf(1)}, Y: []float64{2, 3, 1}, Points: true},
		},
	}
	st := render(t, c)
	// train: one polyline of 4 points; val: broken at NaN into 1 + 3 points.
	if len(st.polylines) != 3 {
		t.Fatalf("%d polylines, want 3", len(st.polylines))
	}
	for i, want := range []int{4, 1, 3} {
		if got := len(st.polylines[i]); got != want {
			t.Errorf("polyline %d has %d points, want %d", i, got, want)
		}
	}
	if st.circles != 2 {
		t.Errorf("%d markers, want 2 (the Inf point skipped)", st.circles)
	}
	if st.colours[0] == st.colours[1] {
		t.Errorf("series share colour %s", st.colours[0])
	}
	// Decreasing y must go up the page, i.e. pixel y increases... y=4 is top.
	p := st.polylines[0]
	for i := 1; i < len(p); i++ {
		if !(p[i][0] > p[i-1][0]) || !(p[i][1] > p[i-1][1]) {
			t.Errorf("train points not mapped monotonically: %v", p)
		}
	}
	// Every point lies within the plot area.
	for _, pl := range st.polylines {
		for _, q := range pl {
			if q[0] < marginL || q[0] > marginL+plotW || q[1] < marginT || q[1] > marginT+plotH {
				t.Errorf("point %v outside plot area", q)
			}
		}
	}
	all := strings.Join(st.texts, "|")
	for _, want := range []string{"loss <&> curve", "step", "loss", "train", "val", "scatter"} {
		if !strings.Contains(all, want) {
			t.Errorf("text %q missing from %q", want, all)
		}
	}
}

func TestLogAxis(t *testing.T) {
	c := &Chart{LogX: true, LogY: true, Series: []Series{{Name: "p", X: []float64{1, 10, 100, 1000}, Y: []float64{1e-3, 1e-2, 1e-1, 1}}}}
	st := render(t, c)
	if len(st.polylines) != 1 || len(st.polylines[0]) != 4 {
		t.Fatalf("polylines %v", st.polylines)
	}
	// Equal ratios give equal pixel steps on log axes (tolerance 0.02 px from rounding).
	p := st.polylines[0]
	dx0, dy0 := p[1][0]-p[0][0], p[1][1]-p[0][1]
	for i := 2; i < len(p); i++ {
		if math.Abs(p[i][0]-p[i-1][0]-dx0) > 0.02 || math.Abs(p[i][1]-p[i-1][1]-dy0) > 0.02 {
			t.Errorf("log spacing uneven: %v", p)
		}
	}
	all := strings.Join(st.texts, "|")
	for _, want := range []string{"|1|", "|10|", "|100|", "|1000|"} {
		if !strings.Contains("|"+all+"|", want) {
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
			err := tc.c.WriteSVG(io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
}

func TestSingleValueAndSave(t *testing.T) {
	c := &Chart{Series: []Series{{Name: "one", X: []float64{5}, Y: []float64{5}, Points: true}}}
	path := filepath.Join(t.TempDir(), "c.svg")
	if err := c.SaveSVG(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := parse(t, data); st.circles != 1 {
		t.Fatalf("%d markers, want 1", st.circles)
	}
	if err := (&Chart{}).SaveSVG(filepath.Join(t.TempDir(), "x.svg")); err == nil {
		t.Fatal("SaveSVG of empty chart succeeded")
	}
}
