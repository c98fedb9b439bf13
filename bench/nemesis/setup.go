package nemesis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"rgcpred/bench"
	"rgcpred/bench/history"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rollout"
)

// Setup says what Prepare builds a Config from.
type Setup struct {
	// Data is the recording; Model the checkpoint predictord serves, in
	// Precision (fp32, bf16 or int8).
	Data, Model, Precision string
	// Cells is the number of the recording's quality cells served (the
	// first ones, ascending cluster id).
	Cells int
	// Seconds is the length of the stretch played after its history, from
	// the start of the test split.
	Seconds float64
	// Bin is where the binaries go.
	Bin string
	// Record, when not empty, is the flight recorder's stream every
	// instance records into (Config.Record); each schedule audits it.
	Record string
	// AuthKeys turns message authentication on with fresh keys written
	// to Bin (Config.Keys).
	AuthKeys bool
}

// Build builds the nats-server of the nats-server module this module
// requires and predictord into dir, and returns their paths. It runs the
// go command in the working directory, which must lie in this module.
func Build(ctx context.Context, dir string) (natsServer, predictord string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("nemesis: build: %w", err)
	}
	natsServer, predictord = filepath.Join(dir, "nats-server"), filepath.Join(dir, "predictord")
	for _, b := range [][2]string{{natsServer, natsServerPkg}, {predictord, "rgcpred/cmd/predictord"}} {
		if err := goBuild(ctx, b[0], b[1]); err != nil {
			return "", "", err
		}
	}
	return natsServer, predictord, nil
}

// natsServerPkg is the nats-server of the module this one requires.
const natsServerPkg = "github.com/nats-io/nats-server/v2"

// goBuild builds package pkg into the binary out.
func goBuild(ctx context.Context, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nemesis: go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// Prepare builds the binaries, loads the recording, picks the cells and
// rolls out the undisturbed reference of the stretch in predictord's
// arithmetic.
func Prepare(ctx context.Context, s Setup) (*Config, error) {
	ns, pd, err := Build(ctx, s.Bin)
	if err != nil {
		return nil, err
	}
	prec, err := engine.ParsePrecision(s.Precision)
	if err != nil {
		return nil, fmt.Errorf("nemesis: precision: %w", err)
	}
	model, err := filepath.Abs(s.Model)
	if err != nil {
		return nil, fmt.Errorf("nemesis: %w", err)
	}
	rec, err := rgc.Load(s.Data)
	if err != nil {
		return nil, err
	}
	idx, err := rec.SelectCells("quality")
	if err != nil {
		return nil, err
	}
	if s.Cells < 1 || s.Cells > len(idx) {
		return nil, fmt.Errorf("nemesis: %d cells: the recording has %d quality cells", s.Cells, len(idx))
	}
	idx = idx[:s.Cells]
	ids := make([]int, len(idx))
	for i, k := range idx {
		ids[i] = rec.Cells[k].ClusterID
	}
	m, err := bench.LoadEngine(model, 64, runtime.NumCPU(), prec)
	if err != nil {
		return nil, err
	}
	maxBins := int(s.Seconds * rgc.BinRateHz)
	ref, res, err := history.Rollout(ctx, rec, m.Predictor, rollout.Options{Split: rgc.Test, Cells: idx, Stagger: true, MaxBins: maxBins})
	if err != nil {
		return nil, err
	}
	cfg := &Config{NATSServer: ns, Predictord: pd, Model: model, Precision: string(prec), Rec: rec,
		From: res.From - rgc.WindowBins, To: res.To, Cells: ids, Ref: ref}
	if s.Record != "" {
		cfg.Record = &Recorder{Stream: s.Record, Predictor: m.Predictor, Known: m.Cells}
	}
	if s.AuthKeys {
		if cfg.Keys, err = NewKeys(filepath.Join(s.Bin, "keys")); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}
