package train

import (
	"context"
	"fmt"
	"math"

	"rgcpred/rgc"
)

// batch is one prepared training batch.
type batch struct {
	inputs  []float32
	rows    []int // embedding rows
	targets []int
	// teacher holds the teacher's class probabilities ([B][classes]) when
	// the loader has a teacher; err is its failure, if any.
	teacher []float32
	err     error
}

// loader prepares batches on its own goroutine, overlapping window
// extraction with the graph's compute.
type loader struct {
	out  chan *batch
	free chan *batch
}

// newLoader starts drawing batches of size n from split s of rec for the
// cells (indices into rec.Cells; cell i uses embedding row i), seeded with
// seed, until ctx is done. With a teacher, each batch also carries the
// teacher's predictions for its windows.
func newLoader(ctx context.Context, rec *rgc.Recording, s rgc.Split, cells []int, n int, seed uint64, teacher rgc.Predictor) *loader {
	l := &loader{out: make(chan *batch, 2), free: make(chan *batch, 4)}
	for i := 0; i < 4; i++ {
		b := &batch{rows: make([]int, n), targets: make([]int, n)}
		if teacher != nil {
			b.teacher = make([]float32, n*rgc.NumClasses)
		}
		l.free <- b
	}
	row := make(map[int]int, len(cells))
	for i, c := range cells {
		row[c] = i
	}
	smp := rgc.NewSampler(rec, s, cells, seed)
	go func() {
		refs := make([]rgc.WindowRef, n)
		var rb rgc.Batch
		for {
			var b *batch
			select {
			case <-ctx.Done():
				return
			case b = <-l.free:
			}
			for i := range refs {
				refs[i] = smp.Next()
			}
			rec.FillBatch(refs, &rb, b.targets)
			b.inputs = append(b.inputs[:0], rb.Inputs...)
			for i, r := range refs {
				b.rows[i] = row[r.Cell]
			}
			b.err = nil
			if teacher != nil {
				if err := teacher.Predict(&rb, b.teacher); err != nil {
					b.err = fmt.Errorf("teacher: %w", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case l.out <- b:
			}
		}
	}()
	return l
}

// valSet is a fixed set of validation windows held in memory.
type valSet struct {
	inputs  []float32
	rows    []int
	targets []int
}

// newValSet draws n windows of split s (uniformly, fixed seed) for the
// cells.
func newValSet(rec *rgc.Recording, s rgc.Split, cells []int, n int, seed uint64) (*valSet, error) {
	smp := rgc.NewSampler(rec, s, cells, seed)
	if smp.Len() == 0 {
		return nil, fmt.Errorf("recording %s has no %s windows", rec.Name, s)
	}
	row := make(map[int]int, len(cells))
	for i, c := range cells {
		row[c] = i
	}
	refs := make([]rgc.WindowRef, n)
	for i := range refs {
		refs[i] = smp.Next()
	}
	v := &valSet{rows: make([]int, n), targets: make([]int, n)}
	var rb rgc.Batch
	rec.FillBatch(refs, &rb, v.targets)
	v.inputs = rb.Inputs
	for i, r := range refs {
		v.rows[i] = row[r.Cell]
	}
	return v, nil
}

// ClassFrequencies returns the zero-input model: the empirical distribution
// of the target classes over every valid window of split s of the cells
// (pooled), and per cell (in the order of cells). Classes never seen get a
// tiny mass so that NLLs stay finite.
func ClassFrequencies(rec *rgc.Recording, s rgc.Split, cells []int) (pooled []float64, perCell [][]float64) {
	first, last, _ := rec.WindowRange(s)
	pooled = make([]float64, rgc.NumClasses)
	perCell = make([][]float64, len(cells))
	for i, c := range cells {
		cnt := make([]float64, rgc.NumClasses)
		sb := rec.Cells[c].SpikeBins
		for t := first; t <= last; t++ {
			cnt[rgc.Target(sb, t)]++
		}
		for k, v := range cnt {
			pooled[k] += v
		}
		perCell[i] = normalise(cnt)
	}
	return normalise(pooled), perCell
}

func normalise(cnt []float64) []float64 {
	var s float64
	for i := range cnt {
		cnt[i] += 1e-6
		s += cnt[i]
	}
	for i := range cnt {
		cnt[i] /= s
	}
	return cnt
}

// zeroInputNLL returns the mean NLL of the pooled and per-cell zero-input
// models on the validation set.
func (v *valSet) zeroInputNLL(pooled []float64, perCell [][]float64) (float64, float64) {
	var a, b float64
	for i, t := range v.targets {
		a -= math.Log(pooled[t])
		b -= math.Log(perCell[v.rows[i]][t])
	}
	n := float64(len(v.targets))
	return a / n, b / n
}
