package glm

import (
	"fmt"
	"math"

	"rgcpred/rgc"
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

// MaxBasisLen is the longest basis NewBasis builds, in lags: a filter
// longer than the model's input window cannot be applied to it. It also
// bounds the number of bumps, so a basis holds at most MaxBasisLen^2 values.
const MaxBasisLen = rgc.WindowBins

// BasisLen returns the length in lags of the basis NewBasis(n, start,
// first, last, offset) builds, checking the arguments without allocating:
// 1..MaxBasisLen bumps, a start lag of 0..MaxBasisLen, finite peaks with
// 0 <= first < last (or first == last for one bump), a finite offset > 0,
// and a resulting length of at most MaxBasisLen.
func BasisLen(n, start int, first, last, offset float64) (int, error) {
	switch {
	case n < 1 || n > MaxBasisLen:
		return 0, fmt.Errorf("basis: %d bumps, want 1..%d", n, MaxBasisLen)
	case start < 0:
		return 0, fmt.Errorf("basis: start lag %d is negative", start)
	case start > MaxBasisLen:
		return 0, fmt.Errorf("basis: start lag %d exceeds the %d-lag limit", start, MaxBasisLen)
	case !finite(first) || !finite(last) || !finite(offset) || !(offset > 0) || first < 0 || !(last > first || (n == 1 && last == first)):
		return 0, fmt.Errorf("basis: peaks %g..%g with offset %g: want 0 <= first < last and offset > 0, all finite", first, last, offset)
	}
	_, _, end := basisAxis(n, first, last, offset)
	// end may be +Inf or NaN for extreme peaks; compare before converting.
	if !(end <= float64(MaxBasisLen-start)) {
		return 0, fmt.Errorf("basis: %d bumps from lag %d peaking up to %g (offset %g) span %g lags: they exceed the %d-lag limit", n, start, last, offset, float64(start)+math.Ceil(end), MaxBasisLen)
	}
	return start + int(math.Ceil(end)), nil
}

// basisAxis returns the first bump's centre, the spacing of the centres on
// the log axis and the lag (relative to the start) where the last bump
// ends, y1 + 2 spacing on the log axis.
func basisAxis(n int, first, last, offset float64) (y0, spacing, end float64) {
	y0, y1 := math.Log(first+offset), math.Log(last+offset)
	spacing = 1.0
	if n > 1 {
		spacing = (y1 - y0) / float64(n-1)
	}
	return y0, spacing, math.Exp(y1+2*spacing) - offset
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// NewBasis builds n raised-cosine bumps starting at lag start whose peaks lie
// at x = first..last (x = lag - start) on the axis log(x + offset). The
// basis is as long as the last bump reaches; BasisLen checks the arguments
// and bounds that length by MaxBasisLen before anything is allocated.
func NewBasis(n, start int, first, last, offset float64) (*Basis, error) {
	length, err := BasisLen(n, start, first, last, offset)
	if err != nil {
		return nil, err
	}
	y0, spacing, _ := basisAxis(n, first, last, offset)
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
