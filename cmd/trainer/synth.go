package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"rgcpred/base/cli"
	"rgcpred/base/plot"
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
	RateHz    rgc.MinMeanMax `json:"rate_hz"`
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
	fs := flag.NewFlagSet("trainer synth", flag.ContinueOnError)
	out := fs.String("out", "", "directory to write the recording and truth.json to (required)")
	cells := fs.Int("cells", 60, "number of cells")
	minutes := fs.Float64("minutes", 15, "length of the recording in minutes")
	seed := fs.Uint64("seed", 1, "population seed (same seed, same files)")
	nll := fs.Bool("nll", false, "also score the test split: the oracle's Bayes-optimal NLL and the zero-input model's")
	ahead := fs.Bool("lookahead", false,
		fmt.Sprintf("with --nll, also score the oracle that knows frames starting up to %d bins after t", synth.ModelLookahead))
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	plotPath := fs.String("plot", "",
		"write charts of the first cells' true filters: FILE.svg/.png (stimulus) and FILE-history.svg/.png (history)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer synth --out DIR [--cells N] [--minutes M] [--seed S] [--nll [--lookahead]]\n"+
			"                     [--plot FILE.svg] [--json]\n"+
			"\n"+
			"Simulate a recording of GLM ganglion cells under four-LED noise, in the shared layout,\n"+
			"with the cells' true parameters in DIR/truth.json (see rgc/synth).")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return cli.Usagef(fs, "--out is required")
	}
	if *ahead && !*nll {
		return errors.New("--lookahead needs --nll")
	}
	if *plotPath != "" {
		if _, _, err := plot.Paths(*plotPath); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	cfg := synth.Config{Cells: *cells, Minutes: *minutes, Seed: *seed}
	if err := synthesise(ctx, os.Stdout, *out, cfg, *nll, *ahead, *asJSON); err != nil {
		return err
	}
	if *plotPath != "" {
		tr, err := synth.LoadTruth(*out)
		if err != nil {
			return err
		}
		return plotTruth(tr, *plotPath)
	}
	return nil
}

// plotCells is the number of cells plotTruth draws.
const plotCells = 6

// plotTruth draws the first cells' stimulus filters (summed over the LEDs:
// the response to all LEDs switching on together) to path and their history
// filters to path with "-history" before the extension, each as SVG and PNG
// (plot.SaveBoth).
func plotTruth(tr *synth.Truth, path string) error {
	stim := plot.Chart{Title: "true stimulus filters (sum over LEDs)", XLabel: "lag (ms)", YLabel: "weight per bin"}
	hist := plot.Chart{Title: "true spike-history filters", XLabel: "lag (ms)", YLabel: "log-intensity change"}
	for i := 0; i < min(plotCells, len(tr.Cells)); i++ {
		c := &tr.Cells[i]
		name := fmt.Sprintf("cell %d (%s)", c.ClusterID, c.Type)
		var sx, sy []float64
		for j := range c.StimFilter[0] {
			v := 0.0
			for ch := range c.StimFilter {
				v += c.StimFilter[ch][j]
			}
			sx = append(sx, float64(j)*rgc.BinMs)
			sy = append(sy, v)
		}
		stim.Series = append(stim.Series, plot.Series{Name: name, X: sx, Y: sy})
		var hx, hy []float64
		for j, v := range c.HistFilter {
			hx = append(hx, float64(j+1)*rgc.BinMs)
			hy = append(hy, max(v, -10)) // clip the refractory dip for scale
		}
		hist.Series = append(hist.Series, plot.Series{Name: name, X: hx, Y: hy})
	}
	svg, _, err := plot.Paths(path)
	if err != nil {
		return err
	}
	hpath := strings.TrimSuffix(svg, ".svg") + "-history.svg"
	for _, c := range []struct {
		ch   *plot.Chart
		path string
	}{{&stim, path}, {&hist, hpath}} {
		if _, err := plot.SaveBoth(c.ch, c.path); err != nil {
			return fmt.Errorf("plot %s: %w", c.path, err)
		}
	}
	return nil
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
	s.RateHz = rgc.MinMeanMaxOf(rates)
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
		s.NLL = &synthNLLJSON{Windows: res.Windows, Oracle: res.NLL, OracleEntropy: res.Entropy, OracleGapSE: res.GapSE,
			ZeroInput: zero.NLL, ZeroInputEntropy: zero.Entropy}
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
			fmt.Fprintf(w, "  Bayes-optimal NLL (oracle, stimulus known to t): %.4f nats "+
				"(its mean entropy %.4f; NLL - entropy %+.4f, standard error %.4f)\n",
				res.NLL, res.Entropy, res.NLL-res.Entropy, res.GapSE)
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
