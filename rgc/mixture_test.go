package rgc

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// cellPredictor gives every window of cell c the distribution dist[c] (by
// cluster id), and fails on a cell it does not know.
type cellPredictor map[int][]float32

func (p cellPredictor) Predict(b *Batch, out []float32) error {
	for i, c := range b.Cells {
		d, ok := p[c]
		if !ok {
			return errors.New("unknown cell")
		}
		copy(out[i*NumClasses:(i+1)*NumClasses], d)
	}
	return nil
}

// peaked is a distribution with mass hi on class k and the rest spread
// evenly.
func peaked(k int, hi float32) []float32 {
	d := make([]float32, NumClasses)
	for j := range d {
		d[j] = (1 - hi) / (NumClasses - 1)
	}
	d[k] = hi
	return d
}

func twoWindows() *Batch {
	return &Batch{Inputs: make([]float32, 2*WindowLen), Cells: []int{1, 2}, Ends: []int{10, 20}}
}

func TestMixtureAveragesMembers(t *testing.T) {
	a := cellPredictor{1: peaked(3, 0.9), 2: peaked(NoSpikeClass, 0.5)}
	b := cellPredictor{1: peaked(7, 0.6), 2: peaked(NoSpikeClass, 0.8)}
	for _, tc := range []struct {
		name    string
		weights []float64
		want    []float64 // normalised
	}{
		{"equal", []float64{1, 1}, []float64{0.5, 0.5}},
		{"unnormalised", []float64{6.5, 3.5}, []float64{0.65, 0.35}},
		{"normalised", []float64{0.2, 0.8}, []float64{0.2, 0.8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMixture([]Predictor{a, b}, tc.weights)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range m.Weights() {
				if math.Abs(w-tc.want[i]) > 1e-12 {
					t.Fatalf("weight %d = %v, want %v", i, w, tc.want[i])
				}
			}
			bt := twoWindows()
			out := make([]float32, 2*NumClasses)
			for i := range out {
				out[i] = float32(math.NaN()) // must be overwritten, not added to
			}
			if err := m.Predict(bt, out); err != nil {
				t.Fatal(err)
			}
			for i, c := range bt.Cells {
				sum := 0.0
				for k := 0; k < NumClasses; k++ {
					want := tc.want[0]*float64(a[c][k]) + tc.want[1]*float64(b[c][k])
					got := float64(out[i*NumClasses+k])
					if math.Abs(got-want) > 1e-6 {
						t.Fatalf("window %d class %d = %v, want %v", i, k, got, want)
					}
					sum += got
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Fatalf("window %d sums to %v", i, sum)
				}
				// Jensen: the mixture's log loss is at most the members' mean.
				for k := 0; k < NumClasses; k++ {
					mix := -math.Log(float64(out[i*NumClasses+k]))
					mean := -tc.want[0]*math.Log(float64(a[c][k])) - tc.want[1]*math.Log(float64(b[c][k]))
					if mix > mean+1e-6 {
						t.Fatalf("window %d class %d: mixture loss %v above the members' mean %v", i, k, mix, mean)
					}
				}
			}
		})
	}
}

func TestMixtureErrors(t *testing.T) {
	good := cellPredictor{1: peaked(0, 0.5), 2: peaked(1, 0.5)}
	partial := cellPredictor{1: peaked(0, 0.5)}
	for _, tc := range []struct {
		name    string
		members []Predictor
		weights []float64
		out     int
		want    string
	}{
		{"no members", nil, nil, 2 * NumClasses, "no members"},
		{"weights count", []Predictor{good, good}, []float64{1}, 2 * NumClasses, "1 weights for 2 members"},
		{"zero weight", []Predictor{good, good}, []float64{1, 0}, 2 * NumClasses, "member 1 has weight 0"},
		{"negative weight", []Predictor{good}, []float64{-1}, 2 * NumClasses, "member 0 has weight -1"},
		{"NaN weight", []Predictor{good}, []float64{math.NaN()}, 2 * NumClasses, "weight NaN"},
		{"infinite weight", []Predictor{good}, []float64{math.Inf(1)}, 2 * NumClasses, "weight +Inf"},
		{"member fails", []Predictor{good, partial}, []float64{1, 1}, 2 * NumClasses, "mixture member 1: unknown cell"},
		{"short output", []Predictor{good}, []float64{1}, NumClasses, "output has 81 floats for 2 windows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMixture(tc.members, tc.weights)
			if err == nil {
				err = m.Predict(twoWindows(), make([]float32, tc.out))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestMixtureAllocatesNothing: predictord calls a served mixture
// (--ensemble, --glm-mix) on every batch, so after its first call a
// mixture allocates nothing.
func TestMixtureAllocatesNothing(t *testing.T) {
	a := cellPredictor{1: peaked(3, 0.9), 2: peaked(NoSpikeClass, 0.5)}
	b := cellPredictor{1: peaked(7, 0.6), 2: peaked(NoSpikeClass, 0.8)}
	m, err := NewMixture([]Predictor{a, b}, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	bt := twoWindows()
	out := make([]float32, 2*NumClasses)
	if n := testing.AllocsPerRun(50, func() {
		if err := m.Predict(bt, out); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}
