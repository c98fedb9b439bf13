package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"rgcpred/bench"
	"rgcpred/bench/history"
	"rgcpred/bench/replay"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/serve/modelload"
)

// checkOptions are the flags of the history check.
type checkOptions struct {
	on bool
}

func (c *checkOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.on, "check", false,
		"count lost, duplicated, wrong and late decisions against the offline rollout of --ckpt or --oracle (arithmetic: --precision)")
}

// referencePrecision returns the arithmetic the reference rollout runs in:
// --precision, else the daemon's default.
func referencePrecision(precision string, embedded bool) (engine.Precision, error) {
	switch {
	case precision != "":
		p, err := engine.ParsePrecision(precision)
		if err != nil {
			return "", fmt.Errorf("--precision: %w", err)
		}
		return p, nil
	case embedded:
		return engine.FP32, nil
	default:
		return engine.INT8, nil
	}
}

// checkHistory runs the undisturbed offline rollout of the replayed
// stretch and checks the decisions the replay received against it.
func checkHistory(ctx context.Context, o *options, rec *rgc.Recording, res *replay.Result, log *history.Log, stderr io.Writer) (*history.Report, error) {
	split, err := rgc.ParseSplit(o.split)
	if err != nil {
		return nil, fmt.Errorf("--check: --split %s: the reference rolls out a named split: %w", o.split, err)
	}
	var p rgc.Predictor
	if o.oracle {
		m, err := modelload.Oracle(o.data, o.stim)
		if err != nil {
			return nil, err
		}
		p = m.Predictor
	} else {
		prec, err := referencePrecision(o.audit.precision, o.embedded)
		if err != nil {
			return nil, err
		}
		m, err := bench.LoadEngine(o.ckpt, 64, o.threads, prec)
		if err != nil {
			return nil, err
		}
		p = m.Predictor
	}
	idx := make([]int, len(res.Cells))
	for i, id := range res.Cells {
		idx[i], _ = rec.CellIndex(id)
	}
	fmt.Fprintf(stderr, "replay: rolling out the reference (%d cells)\n", len(idx))
	ref, off, err := history.Rollout(ctx, rec, p, rollout.Options{Split: split, Cells: idx, Stagger: res.Stagger,
		MaxBins: res.To - res.First - 1})
	if err != nil {
		return nil, err
	}
	if off.From != res.First+1 || off.To != res.To {
		return nil, fmt.Errorf("--check: the reference compares bins %d..%d, the replay %d..%d", off.From, off.To, res.First+1, res.To)
	}
	if err := ref.SameStarts(res.Cells, res.Starts); err != nil {
		return nil, fmt.Errorf("--check: %w (replay all the daemon's cells)", err)
	}
	return history.Check(ref, log.Received(), uint16(res.Epoch)), nil
}
