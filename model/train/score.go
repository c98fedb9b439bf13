package train

import (
	"context"
	"fmt"
	"math"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// ScoreResult compares a model with the zero-input models on a set of
// windows: mean NLLs (nats) and standard errors.
type ScoreResult struct {
	// N is the number of windows scored.
	N int
	// Model is the model's mean NLL and ModelSE its standard error.
	Model, ModelSE float64
	// ZeroPooled and ZeroPerCell are the mean NLLs of the pooled and
	// per-cell zero-input models.
	ZeroPooled, ZeroPerCell float64
	// DiffSE is the standard error of the mean paired difference between
	// the model and the per-cell zero-input model.
	DiffSE float64
}

// Score evaluates a checkpoint with the inference engine on n windows drawn
// uniformly (fixed seed) from split s of rec for cells (indices into
// rec.Cells, in the checkpoint's embedding order), against the zero-input
// models fitted on the training split.
func Score(ctx context.Context, ck *model.Checkpoint, rec *rgc.Recording, s rgc.Split, cells []int, n, threads int) (*ScoreResult, error) {
	if n < 2 {
		return nil, fmt.Errorf("score: need at least 2 windows, got %d", n)
	}
	if err := ck.CheckInput(rec.StimMode); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	val, err := newValSet(rec, s, cells, n, 0x5c0e)
	if err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	const batch = 64
	e, err := engine.New(ck, batch, threads)
	if err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	defer e.Close()
	pooled, perCell := ClassFrequencies(rec, rgc.Train, cells)
	var sm, sm2, sd, sd2, sp, sc float64
	err = scoreValSet(ctx, e, val, ck.CellIDs, batch, func(i int, v float64) {
		t := val.targets[i]
		zc := -math.Log(perCell[val.rows[i]][t])
		sm += v
		sm2 += v * v
		sd += v - zc
		sd2 += (v - zc) * (v - zc)
		sp -= math.Log(pooled[t])
		sc += zc
	})
	if err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	fn := float64(n)
	se := func(s, s2 float64) float64 { return math.Sqrt(math.Max(s2/fn-(s/fn)*(s/fn), 0) / (fn - 1)) }
	return &ScoreResult{N: n, Model: sm / fn, ModelSE: se(sm, sm2), ZeroPooled: sp / fn, ZeroPerCell: sc / fn, DiffSE: se(sd, sd2)}, nil
}

// scoreValSet scores the windows of val on e, batch windows per call, the
// embedding row r being the cell with cluster id ids[r], and calls fn with
// each window's index and NLL, in order. It turns off e's reuse of a cell's
// previous window: the windows are drawn at random.
func scoreValSet(ctx context.Context, e *engine.Engine, val *valSet, ids []int, batch int, fn func(i int, nll float64)) error {
	e.SetReuse(false)
	probs := make([]float32, batch*rgc.NumClasses)
	b := &rgc.Batch{}
	n := len(val.targets)
	for lo := 0; lo < n; lo += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		m := min(batch, n-lo)
		b.Inputs = val.inputs[lo*rgc.WindowLen : (lo+m)*rgc.WindowLen]
		b.Cells, b.Ends = b.Cells[:0], b.Ends[:0]
		for i := lo; i < lo+m; i++ {
			b.Cells = append(b.Cells, ids[val.rows[i]])
			b.Ends = append(b.Ends, 0)
		}
		if err := e.Predict(b, probs); err != nil {
			return err
		}
		for i := range m {
			fn(lo+i, model.NLL(probs[i*rgc.NumClasses:(i+1)*rgc.NumClasses], val.targets[lo+i]))
		}
	}
	return nil
}
