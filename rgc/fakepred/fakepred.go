// Package fakepred is a deterministic stand-in for a trained model: its
// prediction is a hash of the whole window (every stimulus and spike-history
// value, bit for bit) and the cell id, so any difference in what two callers
// feed it shows up as a different median class. Tests of the daemon and the
// replay tools use it to compare the daemon with the offline rollout.
package fakepred

import (
	"fmt"
	"math"

	"rgcpred/rgc"
)

// Peak is the probability the fake puts on its chosen class; the rest is
// spread evenly, so the median is the chosen class.
const Peak = 0.6

// Hash is the fake predictor. The zero value knows no cells.
type Hash struct {
	known map[int]bool
	// Calls counts Predict calls, Windows the windows predicted.
	Calls, Windows int
}

// New returns a fake predictor that knows the given cluster ids.
func New(cells []int) *Hash {
	h := &Hash{known: make(map[int]bool, len(cells))}
	for _, c := range cells {
		h.known[c] = true
	}
	return h
}

// Class returns the class the fake chooses for a window (rgc.WindowLen
// floats) of cell: about half the windows get a spike class 0..79, the rest
// rgc.NoSpikeClass.
func Class(window []float32, cell int) int {
	h := uint64(0x9e3779b97f4a7c15) ^ uint64(cell)*0xff51afd7ed558ccd
	for _, v := range window[:rgc.WindowLen] {
		h ^= uint64(math.Float32bits(v))
		h *= 0x100000001b3
		h ^= h >> 29
	}
	r := int(h % (2 * rgc.Horizon))
	if r < rgc.Horizon {
		return r
	}
	return rgc.NoSpikeClass
}

// Predict implements rgc.Predictor.
func (f *Hash) Predict(b *rgc.Batch, out []float32) error {
	if err := b.Check(); err != nil {
		return fmt.Errorf("fakepred: %w", err)
	}
	if len(out) < b.Len()*rgc.NumClasses {
		return fmt.Errorf("fakepred: out has %d floats for %d windows", len(out), b.Len())
	}
	f.Calls++
	rest := float32((1 - Peak) / (rgc.NumClasses - 1))
	for i, cell := range b.Cells {
		if !f.known[cell] {
			return fmt.Errorf("fakepred: unknown cell %d", cell)
		}
		k := Class(b.Inputs[i*rgc.WindowLen:(i+1)*rgc.WindowLen], cell)
		row := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		for j := range row {
			row[j] = rest
		}
		row[k] = Peak
		f.Windows++
	}
	return nil
}
