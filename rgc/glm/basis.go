package glm

import (
	"fmt"
	"math"
)

// Basis is a set of raised-cosine bumps on a logarithmically stretched time
// axis (Pillow et al. 2008, Nature 454:995-999, Supplementary Methods):
// bump i at lag j is
//
//	B_i(j) = (1 + cos(clamp((log(x + Offset) - y_i) * pi / (2 Spacing), -pi, pi))) / 2
//
// with x = j - Start (zero for j < Start), and centres y_i evenly spaced by
// Spacing from log(first + offset) to log(last + offset). A bump spans four
// spacings, so in the interior the bumps sum to a constant (2): fine
// resolution at short lags, coarse at long ones, with few parameters.
type Basis struct {
	// Start is the first lag a bump can reach (x = 0).
	Start int
	// Len is the number of lags the basis spans (0..Len-1); every bump is
	// zero beyond it.
	Len int
	// Rows holds bump i's values at lags 0..Len-1.
	Rows [][]float64
}

// NewBasis builds n raised-cosine bumps starting at lag start whose peaks lie
// at x = first..last (x = lag - start) on the axis log(x + offset). The
// basis is as long as the last bump reaches.
func NewBasis(n, start int, first, last, offset float64) (*Basis, error) {
	switch {
	case n < 1:
		return nil, fmt.Errorf("basis: %d bumps, want at least 1", n)
	case start < 0:
		return nil, fmt.Errorf("basis: start lag %d is negative", start)
	case !(offset > 0) || first < 0 || !(last > first || (n == 1 && last == first)):
		return nil, fmt.Errorf("basis: peaks %g..%g with offset %g: want 0 <= first < last and offset > 0", first, last, offset)
	}
	y0, y1 := math.Log(first+offset), math.Log(last+offset)
	spacing := 1.0
	if n > 1 {
		spacing = (y1 - y0) / float64(n-1)
	}
	// The last bump ends at y1 + 2 spacing.
	end := math.Exp(y1+2*spacing) - offset
	length := start + int(math.Ceil(end))
	b := &Basis{Start: start, Len: length, Rows: make([][]float64, n)}
	for i := range b.Rows {
		yi := y0 + float64(i)*spacing
		row := make([]float64, length)
		for j := start; j < length; j++ {
			z := (math.Log(float64(j-start)+offset) - yi) * math.Pi / (2 * spacing)
			if z > -math.Pi && z < math.Pi {
				row[j] = (1 + math.Cos(z)) / 2
			}
		}
		b.Rows[i] = row
	}
	return b, nil
}

// Filter returns sum_i w[i] B_i as a filter over lags 0..Len-1.
func (b *Basis) Filter(w []float64) []float64 {
	out := make([]float64, b.Len)
	for i, row := range b.Rows {
		for j, v := range row {
			out[j] += w[i] * v
		}
	}
	return out
}

// cumulative returns the running sums C_i(n) = sum_{j<=n} B_i(j).
func (b *Basis) cumulative() [][]float64 {
	out := make([][]float64, len(b.Rows))
	for i, row := range b.Rows {
		c := make([]float64, len(row))
		s := 0.0
		for j, v := range row {
			s += v
			c[j] = s
		}
		out[i] = c
	}
	return out
}
