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
	e.SetReuse(false) // windows drawn at random: no cell's window follows its last
	pooled, perCell := ClassFrequencies(rec, rgc.Train, cells)
	probs := make([]float32, batch*rgc.NumClasses)
	b := &rgc.Batch{}
	var sm, sm2, sd, sd2, sp, sc float64
	for lo := 0; lo < n; lo += batch {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("score: %w", err)
		}
		m := min(batch, n-lo)
		b.Inputs = val.inputs[lo*rgc.WindowLen : (lo+m)*rgc.WindowLen]
		b.Cells, b.Ends = b.Cells[:0], b.Ends[:0]
		for i := lo; i < lo+m; i++ {
			b.Cells = append(b.Cells, ck.CellIDs[val.rows[i]])
			b.Ends = append(b.Ends, 0)
		}
		if err := e.Predict(b, probs); err != nil {
			return nil, fmt.Errorf("score: %w", err)
		}
		for i := 0; i < m; i++ {
			t := val.targets[lo+i]
			v := model.NLL(probs[i*rgc.NumClasses:(i+1)*rgc.NumClasses], t)
			zc := -math.Log(perCell[val.rows[lo+i]][t])
			sm += v
			sm2 += v * v
			sd += v - zc
			sd2 += (v - zc) * (v - zc)
			sp -= math.Log(pooled[t])
			sc += zc
		}
	}
	fn := float64(n)
	se := func(s, s2 float64) float64 { return math.Sqrt(math.Max(s2/fn-(s/fn)*(s/fn), 0) / (fn - 1)) }
	return &ScoreResult{N: n, Model: sm / fn, ModelSE: se(sm, sm2), ZeroPooled: sp / fn, ZeroPerCell: sc / fn, DiffSE: se(sd, sd2)}, nil
}
