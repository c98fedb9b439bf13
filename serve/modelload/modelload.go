// Package modelload finds predictord's checkpoint file and loads it into
// the CPU inference engine (model/engine) or the GPU engine (model/gpu) as
// a service.Loader.
package modelload

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/model/gpu"
	"rgcpred/serve/service"
)

// Resolve finds the checkpoint: an absolute path as is; a relative one
// from the working directory, else from the repository root (the nearest
// parent of the working directory or of the executable holding go.mod of
// module rgcpred).
func Resolve(path string) (string, error) {
	if _, err := os.Stat(path); err == nil || filepath.IsAbs(path) {
		if err != nil {
			return "", fmt.Errorf("model checkpoint %s: %w", path, err)
		}
		return path, nil
	}
	tried := []string{path}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		if root := RepoRoot(dir); root != "" {
			p := filepath.Join(root, path)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			tried = append(tried, p)
		}
	}
	return "", fmt.Errorf("model checkpoint %s not found (tried %s); train one with `go run ./cmd/trainer train` or pass --model", path, strings.Join(tried, ", "))
}

// RepoRoot returns the nearest directory at or above dir holding the go.mod
// of module rgcpred ("" if none).
func RepoRoot(dir string) string {
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "module rgcpred") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Engine returns a loader of checkpoints into the CPU inference engine with
// the given number of threads and arithmetic. BF16 and INT8 take effect
// only where the CPU has their instructions and the path agrees with
// float32 on probe windows (engine.SetPrecision; INT8 falls back to BF16,
// either to FP32); the model's name says which arithmetic serves and why.
func Engine(threads int, prec engine.Precision) service.Loader {
	return func(path string, maxBatch int) (*service.Model, error) {
		ck, maxBatch, err := load(path, maxBatch)
		if err != nil {
			return nil, err
		}
		eng, err := engine.New(ck, maxBatch, threads)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		arith := string(engine.FP32)
		if prec != engine.FP32 {
			got, par, err := eng.SetPrecision(prec, nil)
			if err != nil {
				_ = eng.Close()
				return nil, fmt.Errorf("checkpoint %s: %w", path, err)
			}
			switch {
			case got == prec:
				arith = fmt.Sprintf("%s (parity with fp32: %s)", got, par)
			case par.Windows == 0:
				arith = fmt.Sprintf("%s (%s asked for: this CPU lacks its instructions)", got, prec)
			default:
				arith = fmt.Sprintf("%s (%s asked for, failed its parity check: %s)", got, prec, par)
			}
		}
		return served(ck, eng, threads, arith), nil
	}
}

// GPU returns a loader of checkpoints into the GPU engine with options o
// (o.MaxBatch is the loader's maxBatch, by default every cell). It gathers
// up to a whole batch of due windows into one call: the GPU computes them
// in parallel.
func GPU(o gpu.Options) service.Loader {
	return func(path string, maxBatch int) (*service.Model, error) {
		ck, maxBatch, err := load(path, maxBatch)
		if err != nil {
			return nil, err
		}
		o.MaxBatch = maxBatch
		eng, err := gpu.New(ck, o)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		return served(ck, eng, maxBatch, eng.Describe()), nil
	}
}

// load loads the checkpoint at path and returns the batch limit: maxBatch,
// or every cell of the checkpoint when it is not positive.
func load(path string, maxBatch int) (*model.Checkpoint, int, error) {
	ck, err := model.LoadCheckpoint(path) // its errors name path
	if err != nil {
		return nil, 0, err
	}
	if maxBatch <= 0 {
		maxBatch = len(ck.CellIDs)
	}
	return ck, maxBatch, nil
}

// served is the service's model of checkpoint ck served by eng, gathering
// up to gather windows a call, in arithmetic arith (for its name).
func served(ck *model.Checkpoint, eng engine.Backend, gather int, arith string) *service.Model {
	name := fmt.Sprintf("%s (data %s, %s stimulus, %d steps, val NLL %.4f, trained %s), %s", ck.Weights.Config.Name(),
		ck.Provenance.Data, ck.StimMode, ck.Provenance.Steps, ck.Provenance.ValNLL, ck.Provenance.TrainedAt, arith)
	return &service.Model{Predictor: eng, Cells: ck.CellIDs, MaxBatch: eng.MaxBatch(), Gather: gather, Name: name, Close: eng.Close,
		BinRateHz: ck.BinRateHz, WindowBins: ck.WindowBins, Horizon: ck.Horizon, StimMode: ck.StimMode}
}
