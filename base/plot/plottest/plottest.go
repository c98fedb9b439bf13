// Package plottest checks plot files in tests: that both files of a plot
// (plot.SaveBoth) exist and decode, the SVG as XML and the PNG as an image,
// and what the SVG draws in each stroke colour.
package plottest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"os"
	"strings"
)

// Files is what the two files of a plot hold: the PNG's size, the SVG's
// texts and the number of paths stroked in each colour.
type Files struct {
	// Width and Height are the PNG's size in pixels.
	Width, Height int
	// Text joins the SVG's text elements, separated by newlines.
	Text string
	// Strokes counts the SVG's paths by stroke colour, as "#RRGGBB" in
	// upper case.
	Strokes map[string]int
}

// Read reads the SVG and PNG files of a plot: it fails unless both exist,
// the SVG parses as XML with an svg root and the PNG decodes.
func Read(svgPath, pngPath string) (*Files, error) {
	f := &Files{Strokes: map[string]int{}}
	data, err := os.ReadFile(pngPath)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pngPath, err)
	}
	f.Width, f.Height = img.Bounds().Dx(), img.Bounds().Dy()
	if data, err = os.ReadFile(svgPath); err != nil {
		return nil, err
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var text strings.Builder
	root, inText := "", false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", svgPath, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = t.Name.Local
			}
			inText = t.Name.Local == "text"
			if t.Name.Local != "path" {
				continue
			}
			for _, a := range t.Attr {
				if a.Name.Local != "style" {
					continue
				}
				for _, decl := range strings.Split(a.Value, ";") {
					if c, ok := strings.CutPrefix(strings.TrimSpace(decl), "stroke:"); ok {
						f.Strokes[strings.ToUpper(c)]++
					}
				}
			}
		case xml.CharData:
			if inText {
				text.Write(t)
				text.WriteByte('\n')
			}
		case xml.EndElement:
			inText = false
		}
	}
	if root != "svg" {
		return nil, fmt.Errorf("%s: root element %q, want svg", svgPath, root)
	}
	f.Text = text.String()
	return f, nil
}

// RasterTicks returns the spike ticks a plot.Raster drew in colour c: the
// SVG's paths stroked in c less the legend's line.
func (f *Files) RasterTicks(c color.Color) int { return f.Strokes[Hex(c)] - 1 }

// Hex formats a colour as Strokes keys it.
func Hex(c color.Color) string {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return fmt.Sprintf("#%02X%02X%02X", n.R, n.G, n.B)
}
