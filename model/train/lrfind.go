package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"rgcpred/internal/plot"
	"rgcpred/model"
	"rgcpred/model/graph"
	"rgcpred/rgc"
)

// LRFindResult is the outcome of a learning-rate range test.
type LRFindResult struct {
	// Rates and Losses are the swept rates and the smoothed training loss.
	Rates, Losses []float64
	// MinRate is the rate of the lowest smoothed loss, Steepest the rate of
	// the steepest descent of the smoothed loss against log rate.
	MinRate, Steepest float64
	// Suggested is the proposed peak rate: MinRate/10, or Steepest when
	// smaller, but not below the sweep's first rate.
	Suggested float64
}

// LRFind runs the learning-rate range test (Smith, "Cyclical learning rates
// for training neural networks", 2017): from fresh weights, the rate grows
// exponentially from lo to hi over steps optimiser steps while the
// debiased exponential average of the training loss (factor 0.98) is
// recorded; the sweep ends early when that loss exceeds four times its
// minimum.
func LRFind(ctx context.Context, o Options, lo, hi float64, steps int) (*LRFindResult, error) {
	o.LR = lo
	o.Steps = max(steps, 2)
	o.Out = "-"
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("lr-find: %w", err)
	}
	if !(lo > 0 && hi > lo) {
		return nil, fmt.Errorf("lr-find: bad rate range %g..%g", lo, hi)
	}
	w := model.InitWeights(o.Config, rand.New(rand.NewPCG(o.Seed, 0x5eed)))
	pooled, _ := ClassFrequencies(o.Rec, rgc.Train, o.Cells)
	initHeadBias(w, pooled)
	tg, err := graph.New(w, o.Batch, graph.Options{Training: true, Threads: o.Threads})
	if err != nil {
		return nil, fmt.Errorf("lr-find: %w", err)
	}
	defer tg.Close()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ld := newLoader(lctx, o.Rec, rgc.Train, o.Cells, o.Batch, o.Seed)
	opt := NewAdamW()
	r := &LRFindResult{}
	ema, best := 0.0, math.Inf(1)
	for i := 0; i < o.Steps; i++ {
		var b *batch
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lr-find: %w", ctx.Err())
		case b = <-ld.out:
		}
		lr := lo * math.Pow(hi/lo, float64(i)/float64(o.Steps-1))
		if err := tg.SetInputs(b.inputs, b.rows, b.targets); err != nil {
			return nil, fmt.Errorf("lr-find: %w", err)
		}
		ld.free <- b
		loss, err := tg.Run()
		if err != nil {
			return nil, fmt.Errorf("lr-find: %w", err)
		}
		if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
			break
		}
		opt.Update(w, tg.Grad, lr)
		ema = 0.98*ema + 0.02*float64(loss)
		sm := ema / (1 - math.Pow(0.98, float64(i+1)))
		r.Rates, r.Losses = append(r.Rates, lr), append(r.Losses, sm)
		fmt.Fprintf(o.Log, "lr %.3g  loss %.4f (raw %.4f)\n", lr, sm, loss)
		// The first steps' average rests on few (noisy) batches: the
		// minimum and the divergence test start after a tenth of the sweep.
		if i < o.Steps/10 {
			continue
		}
		if sm < best {
			best, r.MinRate = sm, lr
		}
		if sm > 4*best {
			break
		}
	}
	if len(r.Rates) < 3 || r.MinRate == 0 {
		return nil, fmt.Errorf("lr-find: only %d steps completed", len(r.Rates))
	}
	steep := math.Inf(1)
	for i := max(1, o.Steps/10); i+1 < len(r.Rates); i++ {
		if r.Rates[i] > r.MinRate {
			break
		}
		d := (r.Losses[i+1] - r.Losses[i-1]) / math.Log(r.Rates[i+1]/r.Rates[i-1])
		if d < steep {
			steep, r.Steepest = d, r.Rates[i]
		}
	}
	r.Suggested = r.MinRate / 10
	if r.Steepest > 0 && r.Steepest < r.Suggested {
		r.Suggested = r.Steepest
	}
	r.Suggested = math.Max(r.Suggested, lo)
	return r, nil
}

// Plot writes the loss-against-rate curve as SVG.
func (r *LRFindResult) Plot(path, title string) error {
	ch := plot.Chart{Title: title, XLabel: "learning rate", YLabel: "smoothed training loss (nats)", LogX: true,
		Series: []plot.Series{
			{Name: "loss", X: r.Rates, Y: r.Losses},
			{Name: "suggested", X: []float64{r.Suggested}, Y: []float64{interp(r, r.Suggested)}, Points: true},
		}}
	return ch.SaveSVG(path)
}

func interp(r *LRFindResult, lr float64) float64 {
	for i, x := range r.Rates {
		if x >= lr {
			return r.Losses[i]
		}
	}
	return r.Losses[len(r.Losses)-1]
}
