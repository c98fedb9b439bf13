package experiment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"rgcpred/evaluation"
	"slices"
	"time"

	"rgcpred/rgc"
)

// evalKey is what a model's per-cell scores depend on, beyond the
// recording and cells fixed by the plan: the model (its kind and the hash
// of its file) and the evaluation settings. Its hash names the cache file.
type evalKey struct {
	Kind      string  `json:"kind"`
	SHA256    string  `json:"sha256,omitempty"`
	Split     string  `json:"split"`
	SigmaMs   float64 `json:"sigma_ms"`
	NLLStride int     `json:"nll_stride"`
	Stagger   bool    `json:"stagger"`
	Policy    string  `json:"policy,omitempty"`
	MaxBins   int     `json:"max_bins,omitempty"`
	BlockBins int     `json:"block_bins,omitempty"`
	Batch     int     `json:"batch"`
	Threads   int     `json:"threads"`
	CellIDs   []int   `json:"cell_ids"`
}

// hash is a short hex digest of the key.
func (k *evalKey) hash() string {
	data, _ := json.Marshal(k)
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:6])
}

// evalRecord is one model's cached evaluation: its per-cell scores on a
// split with the settings of Key.
type evalRecord struct {
	// Model names the run or baseline; Source is its file, if any.
	Model  string  `json:"model"`
	Source string  `json:"source,omitempty"`
	Key    evalKey `json:"key"`
	// NLLStride is the NLL's window stride used; Seconds the time the
	// evaluation took.
	NLLStride int                     `json:"nll_stride_used"`
	Seconds   float64                 `json:"seconds"`
	Cells     []evaluation.CellScores `json:"cells"`
}

// baseline is a baseline model of the experiment.
type baseline struct {
	name, kind, source string
	spec               evaluation.ModelSpec
}

// baselines lists the experiment's baselines: the per-cell zero-input
// model and, when configured, the GLM.
func (x *exp) baselines() []baseline {
	b := []baseline{{name: "zero", kind: "zero", spec: evaluation.ZeroSpec(x.rec, x.cells, false)}}
	if x.evs.GLM != "" {
		b = append(b, baseline{name: "glm", kind: "glm", source: x.evs.GLM, spec: evaluation.GLMSpec(x.rec, x.evs.GLM)})
	}
	return b
}

// evalOptions are the options of evaluation.ScoreCells for the experiment's settings.
func (x *exp) evalOptions() evaluation.Options {
	return evaluation.Options{Rec: x.rec, Cells: x.cells, Split: x.split, Metrics: x.metrics, Batch: x.evs.Batch,
		NLLStride: x.evs.NLLStride, Stagger: x.evs.Stagger, Resamples: x.evs.Resamples, Seed: x.evs.Seed, Progress: x.out,
		Policy: x.policy, MaxBins: x.evs.maxBins(), BlockBins: x.evs.blockBins()}
}

// key is the evaluation key of a model of kind with the file source ("" for
// none).
func (x *exp) key(kind, source string) (evalKey, error) {
	k := evalKey{Kind: kind, Split: x.split.String(), SigmaMs: x.evs.SigmaMs, NLLStride: x.evs.NLLStride,
		Stagger: x.evs.Stagger, Policy: x.evs.Policy, MaxBins: x.evs.maxBins(), BlockBins: x.evs.blockBins(), Batch: x.evs.Batch, Threads: x.plan.Threads, CellIDs: x.ids}
	if source != "" {
		sum, err := fileSHA256(source)
		if err != nil {
			return k, err
		}
		k.SHA256 = sum
	}
	return k, nil
}

// evalRun evaluates the best checkpoint of run r (grid index i), or reads
// its cached evaluation.
func (x *exp) evalRun(ctx context.Context, i int, r *RunState) (*evalRecord, error) {
	ckpt := segmentFiles{dir: x.runDir(r)}.best()
	key, err := x.key("checkpoint", ckpt)
	if err != nil {
		return nil, fmt.Errorf("evaluate run %s: %w", r.Name, err)
	}
	name := fmt.Sprintf("eval-%s-%s.json", key.Split, key.hash())
	label := fmt.Sprintf("eval %d/%d %s [%s]", i+1, len(x.grid), r.Name, key.Split)
	open := func() (rgc.Predictor, func(), error) {
		return evaluation.OpenCheckpoint(ckpt, x.ids, x.evs.Batch, x.plan.Threads, "", x.rec.StimMode)
	}
	ev, computed, err := x.evaluate(ctx, filepath.Join(x.runDir(r), name), r.Name, ckpt, key, label, open)
	if err != nil {
		return nil, fmt.Errorf("evaluate run %s: %w", r.Name, err)
	}
	if computed && !slices.Contains(r.Evaluations, name) {
		if err := x.commit(func() { r.Evaluations = append(r.Evaluations, name) }); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// evalBaseline evaluates a baseline, or reads its cached evaluation.
func (x *exp) evalBaseline(ctx context.Context, b baseline) (*evalRecord, error) {
	key, err := x.key(b.kind, b.source)
	if err != nil {
		return nil, fmt.Errorf("evaluate baseline %s: %w", b.name, err)
	}
	path := filepath.Join(x.dir, "baselines", fmt.Sprintf("%s-%s-%s.json", b.name, key.Split, key.hash()))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("evaluate baseline %s: %w", b.name, err)
	}
	ev, _, err := x.evaluate(ctx, path, b.name, b.source, key, fmt.Sprintf("eval %s [%s]", b.name, key.Split), b.spec.Open[0])
	if err != nil {
		return nil, fmt.Errorf("evaluate baseline %s: %w", b.name, err)
	}
	return ev, nil
}

// evaluate reads the cached evaluation at path or computes and caches it;
// computed reports which.
func (x *exp) evaluate(ctx context.Context, path, model, source string, key evalKey, label string,
	open func() (rgc.Predictor, func(), error)) (ev *evalRecord, computed bool, err error) {
	if ev, err := readEval(path); err == nil {
		if len(ev.Cells) == len(x.ids) {
			x.evalDone(0, false)
			return ev, false, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	start := time.Now()
	p, closeFn, err := open()
	if err != nil {
		return nil, false, err
	}
	x.logf("%s: scoring %d cells", label, len(x.cells))
	rows, stride, err := evaluation.ScoreCells(ctx, p, label, x.evalOptions())
	closeFn()
	if err != nil {
		return nil, false, err
	}
	ev = &evalRecord{Model: model, Source: source, Key: key, NLLStride: stride, Seconds: time.Since(start).Seconds(), Cells: rows}
	data, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return nil, false, fmt.Errorf("encode %s: %w", path, err)
	}
	if err := writeFileAtomic(path, append(data, '\n')); err != nil {
		return nil, false, err
	}
	x.evalDone(ev.Seconds, true)
	return ev, true, nil
}

// evalDone counts a finished evaluation, timed when it was computed.
func (x *exp) evalDone(secs float64, timed bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.evalsDone++
	if timed {
		x.evalSecs += secs
		x.evalsTimed++
	}
}

// readEval reads a cached evaluation.
func readEval(path string) (*evalRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ev evalRecord
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, fmt.Errorf("cached evaluation %s: %w", path, err)
	}
	return &ev, nil
}

// fileSHA256 is the hex SHA-256 of a file's content.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
