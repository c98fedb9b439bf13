package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
)

// synthJSON is synth's JSON summary.
type synthJSON struct {
	Out       string         `json:"out"`
	Seed      uint64         `json:"seed"`
	Cells     int            `json:"cells"`
	Bins      int            `json:"bins"`
	DurationS float64        `json:"duration_s"`
	Frames    int            `json:"frames"`
	Types     map[string]int `json:"types"`
	RateHz    rangeJSON      `json:"rate_hz"`
	GenerateS float64        `json:"generate_s"`
	// The NLLs (nats) of the test split, with --nll.
	NLL *synthNLLJSON `json:"nll,omitempty"`
}

// synthNLLJSON reports the test split's NLLs.
type synthNLLJSON struct {
	Windows          int      `json:"windows"`
	Oracle           float64  `json:"oracle"`
	OracleEntropy    float64  `json:"oracle_entropy"`
	OracleGapSE      float64  `json:"oracle_gap_se"`
	OracleLookahead  *float64 `json:"oracle_lookahead,omitempty"`
	ZeroInput        float64  `json:"zero_input"`
	ZeroInputEntropy float64  `json:"zero_input_entropy"`
	Seconds          float64  `json:"seconds"`
}

// runSynth implements `trainer synth`.
func runSynth(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	out := fs.String("out", "", "directory to write the recording and truth.json to (required)")
	cells := fs.Int("cells", 60, "number of cells")
	minutes := fs.Float64("minutes", 15, "length of the recording in minutes")
	seed := fs.Uint64("seed", 1, "population seed (same seed, same files)")
	nll := fs.Bool("nll", false, "also score the test split: the oracle's Bayes-optimal NLL and the zero-input model's")
	ahead := fs.Bool("lookahead", false, fmt.Sprintf("with --nll, also score the oracle that knows frames starting up to %d bins after t (as far as the model's filtered stimulus reaches)", synth.ModelLookahead))
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer synth --out DIR [--cells N] [--minutes M] [--seed S] [--nll [--lookahead]] [--json]\n\nSimulate a recording of GLM ganglion cells under four-LED noise, in the shared layout,\nwith the cells' true parameters in DIR/truth.json (see rgc/synth).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		fs.Usage()
		return errors.New("--out is required")
	}
	if *ahead && !*nll {
		return errors.New("--lookahead needs --nll")
	}
	return synthesise(ctx, os.Stdout, *out, synth.Config{Cells: *cells, Minutes: *minutes, Seed: *seed}, *nll, *ahead, *asJSON)
}

// synthesise generates, writes and (with nll) scores a synthetic recording,
// printing a summary to w.
func synthesise(ctx context.Context, w io.Writer, out string, cfg synth.Config, nll, ahead, asJSON bool) error {
	start := time.Now()
	raw, tr, err := synth.Generate(ctx, cfg)
	if err != nil {
		return err
	}
	if err := raw.Write(out); err != nil {
		return err
	}
	if err := tr.Save(out); err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	genS := time.Since(start).Seconds()

	// Read back through the shared loader: what every other tool sees.
	rec, err := rgc.Load(out)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	s := synthJSON{
		Out: out, Seed: cfg.Seed, Cells: len(rec.Cells), Bins: rec.Bins, DurationS: rec.DurationS(),
		Frames: len(raw.Pattern), Types: map[string]int{}, GenerateS: genS,
	}
	rates := make([]float64, len(rec.Cells))
	for i := range rec.Cells {
		rates[i] = rec.RateHz(i)
		s.Types[tr.Cells[i].Type]++
	}
	sort.Float64s(rates)
	sum := 0.0
	for _, r := range rates {
		sum += r
	}
	s.RateHz = rangeJSON{Min: rates[0], Mean: sum / float64(len(rates)), Max: rates[len(rates)-1]}
	if !asJSON {
		fmt.Fprintf(w, "wrote %s: %d cells (%d on, %d off, %d opponent), %.1f s (%d bins, %d frames), seed %d, in %.1f s\n",
			out, s.Cells, s.Types["on"], s.Types["off"], s.Types["opponent"], s.DurationS, s.Bins, s.Frames, cfg.Seed, genS)
		fmt.Fprintf(w, "rates: %.2f - %.2f Hz (mean %.2f)\n", s.RateHz.Min, s.RateHz.Max, s.RateHz.Mean)
	}

	if nll {
		start := time.Now()
		o, err := synth.OracleFromDir(out)
		if err != nil {
			return err
		}
		idx := rec.QualityCells()
		res, err := synth.BayesNLL(ctx, o, rec, rgc.Test, idx)
		if err != nil {
			return err
		}
		zero := synth.FixedNLL(rec, rgc.Test, idx, synth.ClassFrequencies(rec, rgc.Train, idx))
		s.NLL = &synthNLLJSON{Windows: res.Windows, Oracle: res.NLL, OracleEntropy: res.Entropy, OracleGapSE: res.GapSE, ZeroInput: zero.NLL, ZeroInputEntropy: zero.Entropy}
		if ahead {
			if err := o.SetLookahead(synth.ModelLookahead); err != nil {
				return err
			}
			la, err := synth.BayesNLL(ctx, o, rec, rgc.Test, idx)
			if err != nil {
				return err
			}
			s.NLL.OracleLookahead = &la.NLL
		}
		s.NLL.Seconds = time.Since(start).Seconds()
		if !asJSON {
			fmt.Fprintf(w, "test split, %d windows (%.1f s):\n", res.Windows, s.NLL.Seconds)
			fmt.Fprintf(w, "  Bayes-optimal NLL (oracle, stimulus known to t): %.4f nats (its mean entropy %.4f; NLL - entropy %+.4f, standard error %.4f)\n", res.NLL, res.Entropy, res.NLL-res.Entropy, res.GapSE)
			if s.NLL.OracleLookahead != nil {
				fmt.Fprintf(w, "  oracle knowing frames up to t+%d:                %.4f nats\n", synth.ModelLookahead, *s.NLL.OracleLookahead)
			}
			fmt.Fprintf(w, "  zero-input NLL (training-split class frequencies): %.4f nats\n", zero.NLL)
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(&s)
	}
	return nil
}
