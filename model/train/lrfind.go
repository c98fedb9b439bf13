package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"rgcpred/base/plot"
	"rgcpred/model"
	"rgcpred/model/graph"
	"rgcpred/rgc"
)

// LRFindResult is the outcome of a learning-rate range test.
type LRFindResult struct {
	// Rates and Losses are the swept rates and the smoothed training loss
	// (a debiased exponential average of the batch losses, factor 0.98).
	Rates, Losses []float64
	// ProbeRates and ProbeLosses are the rates at which the fixed probe
	// set was scored and its NLL there: the curve the suggestion is read
	// from, free of batch-to-batch sampling noise.
	ProbeRates, ProbeLosses []float64
	// MinRate is the rate of the lowest probe loss, Steepest the rate of
	// the steepest descent of the probe loss against log rate before it.
	MinRate, Steepest float64
	// Suggested is the proposed peak rate: Steepest (the rate where the
	// loss falls fastest, safely below divergence), or MinRate/10 when no
	// descent was found; never below the sweep's first rate.
	Suggested float64
}

// LRFindOptions size the probe of a learning-rate range test.
type LRFindOptions struct {
	// ProbeWindows is the size of the fixed probe set drawn from the
	// training split (default 512); Points the number of times it is
	// scored during the sweep (default 24).
	ProbeWindows, Points int
}

// LRFind runs the learning-rate range test (Smith, "Cyclical learning rates
// for training neural networks", 2017): from fresh weights, the rate grows
// exponentially from lo to hi over steps optimiser steps.
//
// One batch's NLL is too noisy to compare rates by when spikes are rare (a
// batch of 64 windows holds a handful), so at lp.Points evenly spaced steps
// the model is scored on a fixed probe set of training windows, the same
// windows every time, in inference mode. The sweep ends early when the
// probe loss exceeds twice its minimum or turns NaN.
func LRFind(ctx context.Context, o Options, lo, hi float64, steps int, lp LRFindOptions) (*LRFindResult, error) {
	o.LR = lo
	o.Steps = max(steps, 2)
	o.Out = "-"
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("lr-find: %w", err)
	}
	if !(lo > 0 && hi > lo) {
		return nil, fmt.Errorf("lr-find: bad rate range %g..%g", lo, hi)
	}
	if lp.ProbeWindows < 1 {
		lp.ProbeWindows = 512
	}
	if lp.Points < 3 {
		lp.Points = 24
	}
	every := max(1, o.Steps/lp.Points)
	w := model.InitWeights(o.Config, rand.New(rand.NewPCG(o.Seed, 0x5eed)))
	pooled, _ := ClassFrequencies(o.Rec, rgc.Train, o.Cells)
	initHeadBias(w, pooled)
	tg, err := graph.New(w, o.Batch, graph.Options{Training: true, Threads: o.Threads})
	if err != nil {
		return nil, fmt.Errorf("lr-find: %w", err)
	}
	defer tg.Close()
	probe, err := newValSet(o.Rec, rgc.Train, o.Cells, lp.ProbeWindows, o.Seed^0x960be)
	if err != nil {
		return nil, fmt.Errorf("lr-find: probe set: %w", err)
	}
	ev := newEvaluator(w, probe, o.Batch, o.Threads)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ld := newLoader(lctx, o.Rec, rgc.Train, o.Cells, o.Batch, o.Seed, nil)
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
		if (i+1)%every != 0 && i+1 != o.Steps {
			continue
		}
		pl, err := ev.nll(ctx)
		if err != nil {
			return nil, fmt.Errorf("lr-find: probe: %w", err)
		}
		fmt.Fprintf(o.Log, "lr %.3g  probe loss %.4f  training loss %.4f\n", lr, pl, sm)
		if math.IsNaN(pl) || math.IsInf(pl, 0) {
			break
		}
		r.ProbeRates, r.ProbeLosses = append(r.ProbeRates, lr), append(r.ProbeLosses, pl)
		if pl < best {
			best, r.MinRate = pl, lr
		}
		if pl > 2*best {
			break
		}
	}
	if len(r.ProbeRates) < 3 || r.MinRate == 0 {
		return nil, fmt.Errorf("lr-find: only %d probe points completed", len(r.ProbeRates))
	}
	r.Steepest, r.Suggested = suggestRate(r.ProbeRates, r.ProbeLosses, r.MinRate, lo)
	return r, nil
}

// suggestRate reads a range test's curve (losses at increasing rates, the
// lowest at minRate): it returns the rate of the steepest descent of the
// loss against log rate before minRate (0 if the loss never falls there)
// and the suggested rate, that one or else minRate/10, at least lo.
func suggestRate(rates, losses []float64, minRate, lo float64) (steepest, suggested float64) {
	steep := 0.0
	for i := 1; i+1 < len(rates); i++ {
		if rates[i] > minRate {
			break
		}
		d := (losses[i+1] - losses[i-1]) / math.Log(rates[i+1]/rates[i-1])
		if d < steep {
			steep, steepest = d, rates[i]
		}
	}
	suggested = minRate / 10
	if steepest > 0 {
		suggested = steepest
	}
	return steepest, math.Max(suggested, lo)
}

// Plot writes the loss-against-rate curve as SVG and PNG (plot.SaveBoth:
// path with its extension replaced by .svg and by .png) and returns the
// files written.
func (r *LRFindResult) Plot(path, title string) ([]string, error) {
	ch := plot.Chart{Title: title, XLabel: "learning rate", YLabel: "loss (nats)", LogX: true,
		Series: []plot.Series{
			{Name: "training loss (smoothed)", X: r.Rates, Y: r.Losses},
			{Name: "probe loss", X: r.ProbeRates, Y: r.ProbeLosses, Points: true},
			{Name: "suggested", X: []float64{r.Suggested}, Y: []float64{interp(r, r.Suggested)}, Points: true},
		}}
	return plot.SaveBoth(&ch, path)
}

func interp(r *LRFindResult, lr float64) float64 {
	for i, x := range r.ProbeRates {
		if x >= lr {
			return r.ProbeLosses[i]
		}
	}
	return r.ProbeLosses[len(r.ProbeLosses)-1]
}
