package evaluation

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/model/gpu"
	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rgc/synth"
	"rgcpred/rollout"
)

// ModelSpec is a model to evaluate: a name, a kind, and a constructor per
// repeat (e.g. checkpoints trained with different seeds).
type ModelSpec struct {
	// Name labels the model; Kind is "checkpoint", "zero" (per-cell
	// zero-input baseline), "zero-pooled", "oracle", "glm" or "mix".
	Name, Kind string
	// Paths are the checkpoint files of a checkpoint model, one per repeat.
	Paths []string
	// Members is a mixture's members as given (weight*spec), for reports.
	Members []string
	// Open builds each repeat's predictor and the function that releases
	// it.
	Open []func() (rgc.Predictor, func(), error)
}

// SpecEnv is what ParseSpec needs to build a model: the recording (and its
// directory, for the synthetic oracle), the cells to score and the
// engine's settings.
type SpecEnv struct {
	// Rec is the recording, Data its directory; Cells the cells to score
	// (indices into Rec.Cells).
	Rec   *rgc.Recording
	Data  string
	Cells []int
	// Batch and Threads configure the inference engine of checkpoints
	// (Threads 0: all cores).
	Batch, Threads int
	// Precision is the arithmetic checkpoints run in: float32 ("" or
	// engine.FP32), or engine.BF16 or engine.INT8 on any CPU
	// (Engine.Force), to reproduce a daemon serving in that arithmetic.
	Precision engine.Precision
	// GPU, if not nil, runs checkpoints on the GPU engine with these
	// options (MaxBatch is Batch) instead of the CPU engine.
	GPU *gpu.Options
}

// ParseSpec builds the model a spec names:
//
//	zero            per-cell zero-input baseline (training split's class distribution)
//	zero-pooled     the same, pooled over the cells
//	oracle          the exact oracle of a synthetic recording (truth.json in env.Data)
//	glm:PATH        the GLM fitted by `trainer glm`, evaluated exactly
//	glm-bins:PATH   the same GLM reading only the windows (causal bins)
//	ckpt:P1[,P2...] a checkpoint; several files are repeats of one model
//	mix:[NAME=][W*]SPEC+[W*]SPEC...
//	                the mixture of single models (MixSpec)
func ParseSpec(spec string, env SpecEnv) (ModelSpec, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch {
	case kind == "mix" && arg != "":
		return MixSpec(arg, env)
	case (kind == "zero" || kind == "zero-pooled") && !hasArg:
		return ZeroSpec(env.Rec, env.Cells, kind == "zero-pooled"), nil
	case kind == "oracle" && !hasArg:
		return OracleSpec(env.Data, env.Rec.StimMode), nil
	case kind == "glm" && arg != "":
		return GLMSpec(env.Rec, arg), nil
	case kind == "glm-bins" && arg != "":
		return GLMBinsSpec(env.Rec.StimMode, arg), nil
	case kind == "ckpt" && hasArg:
		paths := strings.Split(arg, ",")
		if slices.Contains(paths, "") {
			return ModelSpec{}, fmt.Errorf("model %q: empty file name", spec)
		}
		ids := make([]int, len(env.Cells))
		for i, c := range env.Cells {
			ids[i] = env.Rec.Cells[c].ClusterID
		}
		if env.GPU != nil {
			return GPUCheckpointSpec(paths, ids, env.Batch, *env.GPU, env.Rec.StimMode), nil
		}
		return CheckpointSpec(paths, ids, env.Batch, env.Threads, env.Precision, env.Rec.StimMode), nil
	}
	return ModelSpec{}, fmt.Errorf("model %q: want zero, zero-pooled, oracle, glm:PATH, glm-bins:PATH, ckpt:PATH[,PATH...] or mix:SPEC+SPEC...", spec)
}

// ZeroSpec is the zero-input baseline fitted on the training split of the
// cells: per cell, or pooled over them.
func ZeroSpec(rec *rgc.Recording, cells []int, pooled bool) ModelSpec {
	kind := "zero"
	if pooled {
		kind = "zero-pooled"
	}
	return ModelSpec{Name: kind, Kind: kind, Open: []func() (rgc.Predictor, func(), error){
		func() (rgc.Predictor, func(), error) {
			z, err := rollout.NewZeroInput(rec, cells, pooled)
			return z, func() {}, err
		}}}
}

// OracleSpec is the exact oracle of the synthetic recording in dir, given
// windows binned in stimulus mode input.
func OracleSpec(dir string, input rgc.StimMode) ModelSpec {
	return ModelSpec{Name: "oracle", Kind: "oracle", Open: []func() (rgc.Predictor, func(), error){
		func() (rgc.Predictor, func(), error) {
			o, err := synth.OracleFromDir(dir)
			if err != nil {
				return nil, nil, err
			}
			o.SetStimMode(input)
			return o, func() {}, nil
		}}}
}

// GLMSpec is the GLM baseline fitted by `trainer glm` (its JSON file at
// path), evaluated exactly on rec.
func GLMSpec(rec *rgc.Recording, path string) ModelSpec {
	return ModelSpec{Name: "glm", Kind: "glm", Open: []func() (rgc.Predictor, func(), error){
		func() (rgc.Predictor, func(), error) {
			tr, err := glm.LoadTruth(path)
			if err != nil {
				return nil, nil, err
			}
			p, err := glm.NewPredictor(rec, tr)
			if err != nil {
				return nil, nil, fmt.Errorf("glm %s: %w", path, err)
			}
			return p, func() {}, nil
		}}}
}

// GLMBinsSpec is the GLM fitted by `trainer glm` (its JSON file at path)
// reading only the windows it is given (glm.NewWindowPredictor), as a
// daemon could run it; input is the stimulus mode of the windows, which
// must be causal.
func GLMBinsSpec(input rgc.StimMode, path string) ModelSpec {
	return ModelSpec{Name: "glm-bins", Kind: "glm-bins", Open: []func() (rgc.Predictor, func(), error){
		func() (rgc.Predictor, func(), error) {
			if input != rgc.StimCausal {
				return nil, nil, fmt.Errorf("glm-bins %s reads causal bins, but the windows are binned %s", path, input)
			}
			tr, err := glm.LoadTruth(path)
			if err != nil {
				return nil, nil, err
			}
			p, err := glm.NewWindowPredictor(tr)
			if err != nil {
				return nil, nil, fmt.Errorf("glm-bins %s: %w", path, err)
			}
			return p, func() {}, nil
		}}}
}

// CheckpointSpec is a checkpoint model with one file per repeat, run by the
// inference engine in arithmetic prec (as SpecEnv.Precision) on the cells
// with cluster ids ids, named after its first file; every file must have
// been trained on stimulus mode input.
func CheckpointSpec(paths []string, ids []int, batch, threads int, prec engine.Precision, input rgc.StimMode) ModelSpec {
	sp := ModelSpec{Name: checkpointName(paths), Kind: "checkpoint", Paths: paths}
	for _, p := range paths {
		sp.Open = append(sp.Open, func() (rgc.Predictor, func(), error) {
			return OpenCheckpoint(p, ids, batch, threads, prec, input)
		})
	}
	return sp
}

// checkpointName names a checkpoint model after its first file, with the
// number of repeats.
func checkpointName(paths []string) string {
	return repeatsName(strings.TrimSuffix(filepath.Base(paths[0]), filepath.Ext(paths[0])), len(paths))
}

// repeatsName is a model's name with " (xN)" for N > 1 repeats (seeds).
func repeatsName(name string, n int) string {
	if n > 1 {
		return fmt.Sprintf("%s (x%d)", name, n)
	}
	return name
}

// OpenCheckpoint loads a checkpoint into an inference engine of batch
// windows and threads threads (0: all cores) running in arithmetic prec
// ("": float32; else as Engine.Force, on any CPU), after checking that it
// knows every cell to evaluate (cluster ids ids, rollout.MissingCells) and
// was trained on the stimulus mode of the input, input.
// The returned function releases the engine.
func OpenCheckpoint(path string, ids []int, batch, threads int, prec engine.Precision, input rgc.StimMode) (rgc.Predictor, func(), error) {
	ck, err := loadFor(path, ids, input)
	if err != nil {
		return nil, nil, err
	}
	if threads < 1 {
		threads = runtime.NumCPU()
	}
	e, err := engine.New(ck, batch, threads)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if prec != "" {
		if err := e.Force(prec); err != nil {
			e.Close()
			return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
	}
	return e, func() { e.Close() }, nil
}

// loadFor loads a checkpoint after checking that it knows every cell to
// evaluate (cluster ids ids, rollout.MissingCells) and was trained on the
// stimulus mode of the input, input.
func loadFor(path string, ids []int, input rgc.StimMode) (*model.Checkpoint, error) {
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		return nil, err
	}
	if err := ck.CheckInput(input); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if missing := rollout.MissingCells(ck.CellIDs, ids); len(missing) > 0 {
		return nil, fmt.Errorf("checkpoint %s does not know cells %v (it has %d cells; try --cells quality)", path, missing, len(ck.CellIDs))
	}
	return ck, nil
}

// GPUCheckpointSpec is CheckpointSpec on the GPU engine (model/gpu) with
// options o, batches of up to batch windows.
func GPUCheckpointSpec(paths []string, ids []int, batch int, o gpu.Options, input rgc.StimMode) ModelSpec {
	sp := ModelSpec{Name: checkpointName(paths), Kind: "checkpoint", Paths: paths}
	o.MaxBatch = batch
	for _, p := range paths {
		sp.Open = append(sp.Open, func() (rgc.Predictor, func(), error) {
			ck, err := loadFor(p, ids, input)
			if err != nil {
				return nil, nil, err
			}
			e, err := gpu.New(ck, o)
			if err != nil {
				return nil, nil, fmt.Errorf("checkpoint %s: %w", p, err)
			}
			return e, func() { e.Close() }, nil
		})
	}
	return sp
}
