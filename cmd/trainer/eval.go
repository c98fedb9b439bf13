package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"rgcpred/internal/plot"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rgc/synth"
	"rgcpred/rollout"
)

// listFlag collects the values of a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// evalCellJSON is one cell's scores in eval's JSON output.
type evalCellJSON struct {
	ClusterID       int     `json:"cluster_id"`
	NLL             float64 `json:"nll"`
	VanRossum       float64 `json:"van_rossum"`
	Schreiber       float64 `json:"schreiber"`
	Pearson         float64 `json:"pearson"`
	RecordedSpikes  float64 `json:"recorded_spikes"`
	GeneratedSpikes float64 `json:"generated_spikes"`
	Windows         int     `json:"rollout_windows"`
}

// evalModelJSON is one evaluated model (one table row).
type evalModelJSON struct {
	Name string `json:"name"`
	// Kind is "checkpoint", "zero" (per-cell zero-input baseline),
	// "zero-pooled", "oracle" or "glm".
	Kind string `json:"kind"`
	// Checkpoints are the repeats of a checkpoint model; their per-cell
	// scores are averaged before summarising.
	Checkpoints []string                   `json:"checkpoints,omitempty"`
	NLLStride   int                        `json:"nll_stride"`
	Summary     map[string]rollout.Summary `json:"summary"`
	Cells       []evalCellJSON             `json:"cells"`
	// Repeats holds each checkpoint's own per-cell scores when there are
	// several.
	Repeats [][]evalCellJSON `json:"repeats,omitempty"`
	Seconds float64          `json:"seconds"`
}

// evalJSON is eval's JSON output.
type evalJSON struct {
	Recording string          `json:"recording"`
	Split     string          `json:"split"`
	Bins      [2]int          `json:"rollout_bins"`
	SigmaMs   float64         `json:"sigma_ms"`
	BinMs     float64         `json:"bin_ms"`
	TauBins   float64         `json:"tau_bins"`
	Resamples int             `json:"resamples"`
	Seed      uint64          `json:"seed"`
	Stagger   bool            `json:"stagger"`
	Models    []evalModelJSON `json:"models"`
}

// metricNames are the summary keys, in table order.
var metricNames = []string{"nll", "van_rossum", "schreiber", "pearson"}

// metricTitles label the metrics in the table and plot.
var metricTitles = map[string]string{
	"nll":        "NLL (lower is better)",
	"van_rossum": "Van Rossum distance (lower is better)",
	"schreiber":  "Schreiber similarity (higher is better)",
	"pearson":    "Smoothed Pearson correlation (higher is better)",
}

// evalSpec is a model to evaluate: a name and a constructor per repeat.
type evalSpec struct {
	name, kind string
	paths      []string
	open       []func() (rgc.Predictor, func(), error)
}

// runEval implements `trainer eval`.
func runEval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	data := fs.String("data", "", "recording directory (required)")
	var ckpts, baselines listFlag
	fs.Var(&ckpts, "ckpt", "checkpoint to evaluate; repeat the flag for several models; FILE1,FILE2,... are repeats of one model (scores averaged per cell)")
	fs.Var(&baselines, "baseline", "baseline to evaluate: zero (per-cell empirical class distribution of the training split) or zero-pooled; repeatable")
	oracle := fs.Bool("oracle", false, "evaluate the exact oracle of a synthetic recording (needs truth.json in --data)")
	glmPath := fs.String("glm", "", "evaluate the GLM fitted by `trainer glm` (its JSON file), exactly, named glm")
	splitName := fs.String("split", "test", "split to evaluate: train, val or test")
	jsonOut := fs.String("json", "", "write per-cell results as JSON to this file")
	plotOut := fs.String("plot", "", "write an SVG comparing the models' IQMs and CIs to this file")
	sigmaMs := fs.Float64("sigma-ms", rollout.DefaultSigmaMs, "smoothing time scale of the spike-train metrics, ms")
	cellsSel := fs.String("cells", "quality", "cells to evaluate: quality or all")
	threads := fs.Int("threads", 0, "engine threads (0: all cores)")
	batch := fs.Int("batch", 64, "windows per predictor call")
	nllStride := fs.Int("nll-stride", 0, "score the NLL on every Nth window end; 0: 1 for input-free baselines, else the smallest stride giving at most 60000 windows (about the rollout's count)")
	resamples := fs.Int("resamples", rollout.DefaultResamples, "bootstrap resamples (at least 2000)")
	seed := fs.Uint64("seed", 1, "bootstrap seed")
	stagger := fs.Bool("stagger", false, "staggered starts, as predictord runs by default: cell i (ascending cluster id) of n starts its rollout floor(i*80/n) bins late (rollout.StartOffset), its train holding the recorded spikes until then")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer eval --data DIR (--ckpt FILE ... | --baseline zero | --oracle | --glm FILE) [flags]\n\nRoll the models out autoregressively on a split and score them (NLL, Van Rossum,\nSchreiber, smoothed Pearson; IQM over cells with a 95% bootstrap CI).")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *data == "" {
		fs.Usage()
		return errors.New("--data is required")
	}
	if len(ckpts) == 0 && len(baselines) == 0 && !*oracle && *glmPath == "" {
		fs.Usage()
		return errors.New("nothing to evaluate: give --ckpt, --baseline zero, --oracle or --glm")
	}
	if *batch < 1 {
		return fmt.Errorf("--batch %d: want at least 1", *batch)
	}
	if *nllStride < 0 {
		return fmt.Errorf("--nll-stride %d: want 0 (auto) or more", *nllStride)
	}
	split, err := rgc.ParseSplit(*splitName)
	if err != nil {
		return fmt.Errorf("--split: %w", err)
	}
	metrics, err := rollout.NewMetrics(*sigmaMs, rgc.BinMs)
	if err != nil {
		return fmt.Errorf("--sigma-ms: %w", err)
	}
	if *resamples < rollout.DefaultResamples {
		return fmt.Errorf("--resamples %d: want at least %d", *resamples, rollout.DefaultResamples)
	}
	rec, err := rgc.Load(*data)
	if err != nil {
		return err
	}
	cells, err := selectCells(rec, *cellsSel)
	if err != nil {
		return err
	}
	if len(cells) == 0 {
		return fmt.Errorf("recording %s has no %s cells", *data, *cellsSel)
	}
	ids := make([]int, len(cells))
	for i, c := range cells {
		ids[i] = rec.Cells[c].ClusterID
	}
	_, from, to, err := rollout.Bins(rec, split)
	if err != nil {
		return err
	}

	var specs []evalSpec
	for _, b := range baselines {
		pooled := false
		switch b {
		case "zero":
		case "zero-pooled":
			pooled = true
		default:
			return fmt.Errorf("--baseline %q: want zero or zero-pooled", b)
		}
		specs = append(specs, evalSpec{name: b, kind: b, open: []func() (rgc.Predictor, func(), error){
			func() (rgc.Predictor, func(), error) {
				z, err := rollout.NewZeroInput(rec, cells, pooled)
				return z, func() {}, err
			}}})
	}
	if *oracle {
		dir := *data
		specs = append(specs, evalSpec{name: "oracle", kind: "oracle", open: []func() (rgc.Predictor, func(), error){
			func() (rgc.Predictor, func(), error) {
				o, err := synth.OracleFromDir(dir)
				return o, func() {}, err
			}}})
	}
	if *glmPath != "" {
		path := *glmPath
		specs = append(specs, evalSpec{name: "glm", kind: "glm", open: []func() (rgc.Predictor, func(), error){
			func() (rgc.Predictor, func(), error) {
				tr, err := glm.LoadTruth(path)
				if err != nil {
					return nil, nil, err
				}
				p, err := glm.NewPredictor(rec, tr)
				return p, func() {}, err
			}}})
	}
	for _, arg := range ckpts {
		paths := strings.Split(arg, ",")
		sp := evalSpec{name: ckptName(paths), kind: "checkpoint", paths: paths}
		for _, p := range paths {
			if p == "" {
				return fmt.Errorf("--ckpt %q: empty file name", arg)
			}
			sp.open = append(sp.open, func() (rgc.Predictor, func(), error) {
				return openCheckpoint(p, ids, *batch, *threads)
			})
		}
		specs = append(specs, sp)
	}

	out := evalJSON{
		Recording: rec.Name, Split: split.String(), Bins: [2]int{from, to},
		SigmaMs: *sigmaMs, BinMs: rgc.BinMs, TauBins: metrics.TauBins(),
		Resamples: *resamples, Seed: *seed, Stagger: *stagger,
	}
	fmt.Fprintf(os.Stderr, "eval: %s, split %s, %d %s cells, rollout bins [%d, %d) (%.1f s), stagger %v\n",
		rec.Name, split, len(cells), *cellsSel, from, to, float64(to-from)/rgc.BinRateHz, *stagger)
	for _, sp := range specs {
		m, err := evalModel(ctx, rec, sp, cells, split, metrics, *batch, *nllStride, *resamples, *seed, *stagger)
		if err != nil {
			return fmt.Errorf("evaluate %s: %w", sp.name, err)
		}
		out.Models = append(out.Models, *m)
	}
	printEvalTable(os.Stdout, &out)
	if *jsonOut != "" {
		if err := writeJSONFile(*jsonOut, &out); err != nil {
			return err
		}
	}
	if *plotOut != "" {
		if err := writeEvalPlot(*plotOut, &out); err != nil {
			return err
		}
	}
	return nil
}

// ckptName names a checkpoint model after its first file, with the number
// of repeats.
func ckptName(paths []string) string {
	n := strings.TrimSuffix(filepath.Base(paths[0]), filepath.Ext(paths[0]))
	if len(paths) > 1 {
		n += fmt.Sprintf(" (x%d)", len(paths))
	}
	return n
}

// openCheckpoint loads a checkpoint into an inference engine, after checking
// that it knows every cell to evaluate.
func openCheckpoint(path string, ids []int, batch, threads int) (rgc.Predictor, func(), error) {
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		return nil, nil, err
	}
	known := make(map[int]bool, len(ck.CellIDs))
	for _, id := range ck.CellIDs {
		known[id] = true
	}
	var missing []int
	for _, id := range ids {
		if !known[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("checkpoint %s does not know cells %v (it has %d cells; try --cells quality)", path, missing, len(ck.CellIDs))
	}
	if threads < 1 {
		threads = runtime.NumCPU()
	}
	e, err := engine.New(ck, batch, threads)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return e, func() { e.Close() }, nil
}

// evalModel evaluates every repeat of one model and summarises it.
func evalModel(ctx context.Context, rec *rgc.Recording, sp evalSpec, cells []int, split rgc.Split,
	metrics *rollout.Metrics, batch, nllStride, resamples int, seed uint64, stagger bool) (*evalModelJSON, error) {
	start := time.Now()
	res := &evalModelJSON{Name: sp.name, Kind: sp.kind, Checkpoints: sp.paths, Summary: map[string]rollout.Summary{}}
	var repeats [][]evalCellJSON
	for r, open := range sp.open {
		p, closeFn, err := open()
		if err != nil {
			return nil, err
		}
		label := sp.name
		if len(sp.open) > 1 {
			label = fmt.Sprintf("%s [%s]", sp.name, filepath.Base(sp.paths[r]))
		}
		stride := nllStride
		if stride == 0 {
			stride = autoStride(rec, split, len(cells), p)
		}
		res.NLLStride = stride
		rows, err := evalOne(ctx, rec, p, label, cells, split, metrics, batch, stride, stagger)
		closeFn()
		if err != nil {
			return nil, err
		}
		repeats = append(repeats, rows)
	}
	res.Cells = averageRepeats(repeats)
	if len(repeats) > 1 {
		res.Repeats = repeats
	}
	for _, name := range metricNames {
		vals := make([]float64, len(res.Cells))
		for i, c := range res.Cells {
			vals[i] = c.metric(name)
		}
		s, err := rollout.Bootstrap(vals, resamples, seed)
		if err != nil {
			return nil, fmt.Errorf("summarise %s: %w", name, err)
		}
		res.Summary[name] = s
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// autoStride is the default NLL stride: every window for input-free
// predictors, else the smallest stride that keeps the windows at 60000,
// about as many as a rollout of the shipped recording's test split predicts,
// so a neural model's NLL costs no more than its rollout. Window ends taken
// at a fixed stride give an unbiased estimate of the mean over all windows.
func autoStride(rec *rgc.Recording, split rgc.Split, ncells int, p rgc.Predictor) int {
	if f, ok := p.(rollout.InputFree); ok && f.InputFree() {
		return 1
	}
	_, _, n := rec.WindowRange(split)
	const maxWindows = 60000
	return max(1, (n*ncells+maxWindows-1)/maxWindows)
}

// metric returns the named score of a cell.
func (c *evalCellJSON) metric(name string) float64 {
	switch name {
	case "nll":
		return c.NLL
	case "van_rossum":
		return c.VanRossum
	case "schreiber":
		return c.Schreiber
	case "pearson":
		return c.Pearson
	}
	panic("unknown metric " + name)
}

// averageRepeats averages per-cell scores over repeats (same cells, same
// order).
func averageRepeats(reps [][]evalCellJSON) []evalCellJSON {
	if len(reps) == 1 {
		return reps[0]
	}
	out := make([]evalCellJSON, len(reps[0]))
	n := float64(len(reps))
	for i := range out {
		out[i].ClusterID = reps[0][i].ClusterID
		out[i].RecordedSpikes = reps[0][i].RecordedSpikes
		var w float64
		for _, r := range reps {
			out[i].NLL += r[i].NLL / n
			out[i].VanRossum += r[i].VanRossum / n
			out[i].Schreiber += r[i].Schreiber / n
			out[i].Pearson += r[i].Pearson / n
			out[i].GeneratedSpikes += r[i].GeneratedSpikes / n
			w += float64(r[i].Windows)
		}
		out[i].Windows = int(math.Round(w / n))
	}
	return out
}

// evalOne scores one predictor: NLL over the split's windows, then the
// rollout and the spike-train metrics per cell.
func evalOne(ctx context.Context, rec *rgc.Recording, p rgc.Predictor, label string, cells []int, split rgc.Split,
	metrics *rollout.Metrics, batch, stride int, stagger bool) ([]evalCellJSON, error) {
	pr := newProgressLine(os.Stderr, label+": nll")
	nll, err := rollout.NLL(ctx, rec, p, rollout.Options{Split: split, Cells: cells, MaxBatch: batch, Progress: pr.update}, stride)
	pr.finish()
	if err != nil {
		return nil, err
	}
	pr = newProgressLine(os.Stderr, label+": rollout")
	roll, err := rollout.Run(ctx, rec, p, rollout.Options{Split: split, Cells: cells, MaxBatch: batch, Progress: pr.update, Stagger: stagger})
	pr.finish()
	if err != nil {
		return nil, err
	}
	rows := make([]evalCellJSON, len(cells))
	for i, tr := range roll.Trains {
		s, err := metrics.Compare(tr.Generated, tr.Recorded)
		if err != nil {
			return nil, fmt.Errorf("cell %d: %w", tr.ClusterID, err)
		}
		rows[i] = evalCellJSON{
			ClusterID: tr.ClusterID, NLL: nll[i],
			VanRossum: s.VanRossum, Schreiber: s.Schreiber, Pearson: s.Pearson,
			RecordedSpikes: sum(tr.Recorded), GeneratedSpikes: sum(tr.Generated), Windows: tr.Windows,
		}
	}
	return rows, nil
}

func sum(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}

// progressLine shows a task's progress: on a terminal one line rewritten at
// most every 200 ms, otherwise (a log file) a line every 10 s.
type progressLine struct {
	w           io.Writer
	tty         bool
	every       time.Duration
	label       string
	start, last time.Time
	p           rollout.Progress
}

func newProgressLine(w io.Writer, label string) *progressLine {
	l := &progressLine{w: w, label: label, start: time.Now(), every: 10 * time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			l.tty, l.every = true, 200*time.Millisecond
		}
	}
	l.last = l.start
	return l
}

func (l *progressLine) update(p rollout.Progress) {
	l.p = p
	if now := time.Now(); now.Sub(l.last) >= l.every {
		l.last = now
		l.show()
	}
}

func (l *progressLine) show() {
	el := time.Since(l.start).Seconds()
	frac := 0.0
	if l.p.Total > 0 {
		frac = float64(l.p.Done) / float64(l.p.Total)
	}
	eta := ""
	if frac > 0 && frac < 1 {
		eta = fmt.Sprintf(", %.0f s left", el/frac-el)
	}
	msg := fmt.Sprintf("%s: %5.1f%% (%d windows, %.0f windows/s, %.1f s%s)",
		l.label, 100*frac, l.p.Windows, float64(l.p.Windows)/math.Max(el, 1e-9), el, eta)
	if l.tty {
		fmt.Fprintf(l.w, "\r%s   ", msg)
	} else {
		fmt.Fprintln(l.w, msg)
	}
}

func (l *progressLine) finish() {
	l.show()
	if l.tty {
		fmt.Fprintln(l.w)
	}
}

// printEvalTable prints one row per model: IQM [95% CI] of each metric.
func printEvalTable(w io.Writer, r *evalJSON) {
	fmt.Fprintf(w, "%s, split %s, rollout bins [%d, %d), smoothing %g ms (%.2f bins); IQM over cells [95%% bootstrap CI, %d resamples]\n",
		r.Recording, r.Split, r.Bins[0], r.Bins[1], r.SigmaMs, r.TauBins, r.Resamples)
	nameW := len("model")
	for _, m := range r.Models {
		nameW = max(nameW, len(m.Name))
	}
	fmt.Fprintf(w, "%-*s  %5s  %-26s  %-26s  %-26s  %-26s\n", nameW, "model", "cells", "NLL (nats)", "Van Rossum", "Schreiber", "Pearson")
	for _, m := range r.Models {
		fmt.Fprintf(w, "%-*s  %5d", nameW, m.Name, len(m.Cells))
		for _, name := range metricNames {
			s := m.Summary[name]
			fmt.Fprintf(w, "  %-26s", fmt.Sprintf("%.4f [%.4f, %.4f]", s.IQM, s.Lo, s.Hi))
		}
		fmt.Fprintln(w)
	}
	for _, m := range r.Models {
		if m.NLLStride > 1 {
			fmt.Fprintf(w, "%s: NLL over every %dth window end (--nll-stride 1 for every window)\n", m.Name, m.NLLStride)
		}
	}
}

func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeEvalPlot writes a 2 x 2 grid of charts, one per metric: each model's
// IQM as a point at x = model number (1, 2, ...; the legend names them) and
// its 95% CI as a vertical bar.
func writeEvalPlot(path string, r *evalJSON) error {
	var buf bytes.Buffer
	const cw, ch = 720, 450 // plot.Chart's size
	fmt.Fprintf(&buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", 2*cw, 2*ch, 2*cw, 2*ch)
	for i, name := range metricNames {
		c := plot.Chart{Title: metricTitles[name], XLabel: "model", YLabel: "IQM over cells, 95% CI"}
		ci := plot.Series{Name: "95% CI"}
		for j, m := range r.Models {
			s := m.Summary[name]
			x := float64(j + 1)
			c.Series = append(c.Series, plot.Series{Name: fmt.Sprintf("%d: %s", j+1, m.Name), X: []float64{x}, Y: []float64{s.IQM}, Points: true})
			ci.X = append(ci.X, x, x, math.NaN())
			ci.Y = append(ci.Y, s.Lo, s.Hi, math.NaN())
		}
		c.Series = append(c.Series, ci)
		var one bytes.Buffer
		if err := c.WriteSVG(&one); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		svg := strings.Replace(one.String(), "<svg ", fmt.Sprintf(`<svg x="%d" y="%d" `, (i%2)*cw, (i/2)*ch), 1)
		buf.WriteString(svg)
	}
	buf.WriteString("</svg>\n")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	return nil
}

// runMetrics implements `trainer metrics`.
func runMetrics(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	a := fs.String("a", "", "first spike train: .npy count vector (int or float)")
	b := fs.String("b", "", "second spike train: .npy count vector of the same length")
	binMs := fs.Float64("bin-ms", rollout.DefaultBinMs, "bin length, ms")
	sigmaMs := fs.Float64("sigma-ms", rollout.DefaultSigmaMs, "smoothing time scale, ms")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer metrics --a A.npy --b B.npy [--bin-ms 1.0082] [--sigma-ms 60] [--json]\n\nVan Rossum distance, Schreiber similarity and smoothed Pearson correlation\nbetween two spike trains.")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *a == "" || *b == "" {
		fs.Usage()
		return errors.New("--a and --b are required")
	}
	m, err := rollout.NewMetrics(*sigmaMs, *binMs)
	if err != nil {
		return err
	}
	x, err := readTrain(*a)
	if err != nil {
		return err
	}
	y, err := readTrain(*b)
	if err != nil {
		return err
	}
	if len(x) != len(y) {
		return fmt.Errorf("spike trains differ in length: %s has %d bins, %s has %d", *a, len(x), *b, len(y))
	}
	s, err := m.Compare(x, y)
	if err != nil {
		return fmt.Errorf("%s vs %s: %w", *a, *b, err)
	}
	if *asJSON {
		data, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Println(string(data))
		return nil
	}
	fmt.Printf("van_rossum %.10g\nschreiber  %.10g\npearson    %.10g\n", s.VanRossum, s.Schreiber, s.Pearson)
	return nil
}

// readTrain reads a spike train from a .npy file: a count vector, i.e. an
// array with at most one dimension longer than 1.
func readTrain(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spike train: %w", err)
	}
	defer f.Close()
	arr, err := rgc.ReadNPY(f)
	if err != nil {
		return nil, fmt.Errorf("read spike train %s: %w", path, err)
	}
	long := 0
	for _, d := range arr.Shape {
		if d > 1 {
			long++
		}
	}
	if long > 1 {
		return nil, fmt.Errorf("read spike train %s: shape %v, want a 1-D count vector", path, arr.Shape)
	}
	x, err := arr.Float64s()
	if err != nil {
		return nil, fmt.Errorf("read spike train %s: %w", path, err)
	}
	if len(x) == 0 {
		return nil, fmt.Errorf("read spike train %s: no bins", path)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("read spike train %s: bin %d is %v", path, i, v)
		}
	}
	return x, nil
}
