// Command latency is the latency benchmark of the real-time predictor: the
// daemon (the service predictord runs) and replay devices in one process
// over an embedded NATS server on loopback, for a rising number of cells,
// each at real time for a stretch of the recording's test split. It prints
// a table and writes the report as JSON and the latency percentiles against
// cells as a plot (SVG and PNG). With --realtime it compares the
// real-time mode off and on, quiet and beside a CPU-heavy job it starts,
// against the host's wake-up floor.
//
//	go run ./bench/cmd/latency [--ckpt models/gpt-a-cat-cpu.ckpt] [--data data/chicken-17-08-21]
//	       [--cells 1,5,10,20,40,60,80,120] [--seconds 20] [--threads 2]
//	       [--json docs/bench-latency.json] [--svg docs/bench-latency.svg] [--cpuprofile FILE] [--trace FILE.csv]
//	       [--realtime [--cpus 0,1] [--beside CMD | --burn-threads 2] [--probe-seconds 5] [--goal-p99 1ms] [--rt-json FILE]]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"rgcpred/base/cli"
	"rgcpred/base/cputime"
	"rgcpred/base/plot"
	"rgcpred/base/rt"
	"rgcpred/bench"
	"rgcpred/evaluation"
	"rgcpred/model/engine"
	"rgcpred/model/gpu"
	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/modelload"
	"rgcpred/serve/service"
)

// NoModel as --ckpt serves a hash of each window (rgc/fakepred) in
// place of a model: what remains of the latency is the daemon's and the
// transport's.
const NoModel = "none"

// parseCounts parses --cells: positive cell counts, returned sorted and
// without repeats.
func parseCounts(s string) ([]int, error) {
	out, err := cli.Ints(s)
	if err != nil {
		return nil, fmt.Errorf("--cells: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("--cells: no cell counts")
	}
	for _, n := range out {
		if n < 1 {
			return nil, fmt.Errorf("--cells: %d is not a positive cell count", n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func run(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("latency", "[flags]",
		"Measure predictord's decision latency at real time for growing cell counts, and report and plot its percentiles.")
	ckpt := fs.String("ckpt", "models/gpt-a-cat-cpu.ckpt",
		"checkpoint the daemon serves ("+NoModel+": a hash per window, to time the daemon and the transport alone)")
	data := fs.String("data", "data/chicken-17-08-21", "recording whose test-split stimulus is played")
	stim := rgc.StimCausal
	fs.TextVar(&stim, "stim", rgc.StimCausal, "stimulus mode the recording is binned and played in: causal or zero-phase; the model's own")
	cells := fs.String("cells", "1,5,10,20,40,60,80,120", "cell counts to measure")
	seconds := fs.Float64("seconds", 20, "seconds of real-time stimulus per cell count (after the 1024-bin history)")
	threads := fs.Int("threads", runtime.NumCPU(), "engine threads")
	maxBatch := fs.Int("max-batch", 0, "most windows per model call (0: every due cell)")
	reloadEvery := fs.Duration("reload-every", 0,
		"reload the model this often while the devices play, as predictord does on SIGHUP (0: never)")
	precision := fs.String("precision", "int8",
		"engine arithmetic, as predictord's --precision: int8, bf16 or fp32 (each falls back where the CPU lacks it)")
	backend := gpu.AddFlags(fs)
	gather := fs.Int("gather", 0,
		"due windows gathered into one model call while frames wait, as predictord's --gather (0: engine threads; -1: none)")
	maxLag := fs.Int64("max-lag", 40,
		"overload threshold in bins, as predictord's --max-lag: skip a decision this far behind the newest frame (0: never)")
	stagger := fs.Bool("stagger", true,
		"stagger the cells' starts, as predictord's --stagger (false: every first window at the same frame)")
	jsonOut := fs.String("json", "out/bench-latency.json", "write the report as JSON here ('' for none; docs/bench-latency.json is the committed one)")
	svgOut := fs.String("svg", "out/bench-latency.svg", "write the latency plot here as SVG and PNG, FILE.svg and FILE.png ('' for none)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run here (go tool pprof)")
	expect := fs.Bool("expect", true,
		"announce each frame's batch a frame ahead, as predictord's --expect (false: helpers wake when a call starts)")
	wholeCalls := fs.Bool("whole-calls", false,
		"publish a call's decisions together at its end, as predictord --whole-calls (default: each as computed)")
	trace := fs.String("trace", "",
		"write every decision's latency in parts as CSV here, and print the slowest 1% in parts (docs/latency.md)")
	auth := fs.String("auth", "off",
		"message authentication of frames and decisions (docs/protocol.md): off, on, or both (each cell count off, then on, in one run)")
	verbose := fs.Bool("v", false, "show the daemon's logs")
	fromJSON := fs.String("from-json", "", "do not measure: read this report and only print the table and write the plot")
	compare := fs.String("compare", "", "a previous report (JSON) whose p99 is drawn on the plot for comparison")
	procs := fs.Int("gomaxprocs", runtime.NumCPU()+2,
		"GOMAXPROCS of the run (default: CPUs + 2, so the devices' goroutines get Ps of their own; docs/latency.md)")
	realtime := fs.Bool("realtime", false,
		"compare the real-time mode off and on, quiet and beside a CPU-heavy job, with the host's wake-up floor (docs/latency.md)")
	cpus := fs.String("cpus", "", "with --realtime: the mode pins the process to these CPUs, as predictord's --cpus")
	beside := fs.String("beside", "", "with --realtime: the job run beside the daemon, a shell command (default: --burn-threads of SGEMM)")
	burnThreads := fs.Int("burn-threads", 2, "with --realtime: threads of the default job beside the daemon")
	burn := fs.Int("burn", 0, "run as the job beside the daemon: SGEMM on this many threads until stopped, and nothing else")
	probeSeconds := fs.Float64("probe-seconds", 5, "with --realtime: seconds of the host's wake-up probe per condition")
	goal := fs.Duration("goal-p99", time.Millisecond, "with --realtime: the p99 each row is held to")
	rtJSON := fs.String("rt-json", "", "with --realtime: write the comparison as JSON here ('' for none)")
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *burn > 0 {
		bench.Burn(ctx, *burn)
		return nil
	}
	if *procs < 1 {
		return fmt.Errorf("--gomaxprocs %d: want at least 1", *procs)
	}
	runtime.GOMAXPROCS(*procs)
	authModes, ok := map[string][]bool{"off": {false}, "on": {true}, "both": {false, true}}[*auth]
	if !ok {
		return fmt.Errorf("--auth %q: want off, on or both", *auth)
	}
	counts, err := parseCounts(*cells)
	if err != nil {
		return err
	}
	if *threads < 1 {
		return fmt.Errorf("--threads %d: want at least 1", *threads)
	}
	if *fromJSON != "" {
		rep, err := bench.ReadReport(*fromJSON)
		if err != nil {
			return err
		}
		return output(rep, "", *svgOut, *compare)
	}
	rec, err := rgc.LoadMode(*data, stim)
	if err != nil {
		return err
	}
	prec, err := engine.ParsePrecision(*precision)
	if err != nil {
		return fmt.Errorf("--precision: %w", err)
	}
	var mdl *service.Model
	if *ckpt == NoModel {
		if *reloadEvery > 0 {
			return fmt.Errorf("--reload-every: --ckpt %s has nothing to reload", NoModel)
		}
		ids := rec.QualityClusterIDs()
		mdl = &service.Model{Predictor: fakepred.New(ids), Cells: ids, StimMode: stim,
			Name: "none: a hash per window (the daemon and the transport alone)"}
	}
	reload := modelload.Engine(*threads, prec)
	cuda, err := backend.CUDA()
	if err != nil {
		return err
	}
	switch {
	case *ckpt == NoModel:
	case cuda:
		gopts, err := backend.Options(*maxBatch)
		if err != nil {
			return err
		}
		if mdl, err = bench.LoadGPU(*ckpt, *maxBatch, gopts); err != nil {
			return err
		}
		reload = modelload.GPU(gopts)
	default:
		if mdl, err = bench.LoadEngine(*ckpt, *maxBatch, *threads, prec); err != nil {
			return err
		}
	}

	log := zerolog.Nop()
	if *verbose {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintf(os.Stderr, "latency: %s on %s, %d cell counts x %.0f s real time, stagger %v\n",
		mdl.Name, rec.Name, len(counts), *seconds, *stagger)
	opts := bench.Options{
		Rec: rec, Model: mdl, ModelPath: *ckpt, Threads: *threads, CellCounts: counts, Seconds: *seconds,
		MaxBatch: *maxBatch, MaxLag: *maxLag, Stagger: *stagger, Log: log,
		Gather: *gather, ReloadEvery: *reloadEvery, Reload: reload,
		Trace: *trace != "", NoExpect: !*expect, WholeCalls: *wholeCalls, Auth: authModes,
		Progress: func(p bench.Point) {
			fmt.Fprintf(os.Stderr, "latency: %3d cells, auth %v: p50 %.3f ms p99 %.3f ms p99.9 %.3f ms max %.3f ms, "+
				"%.0f predictions/s, %d deadline misses (skipped %d, late %d), %d/%d late spikes, cpu %.2f, %d reloads\n",
				p.Cells, p.Auth, p.Latency.P50Ms, p.Latency.P99Ms, p.Latency.P999Ms, p.Latency.MaxMs,
				p.PredictionsPerSec, p.DeadlineMisses, p.DaemonSkipped, p.DeviceLateDecisions, p.LateSpikes, p.Spikes, p.CPU, p.Reloads)
		},
	}
	if *realtime {
		ids, err := cli.Ints(*cpus)
		if err != nil {
			return fmt.Errorf("--cpus: %w", err)
		}
		rep, err := bench.CompareRealTime(ctx, bench.RTOptions{Options: opts, Settings: rt.Settings{CPUs: ids},
			Beside: besideJob(*beside, *burnThreads), ProbeSeconds: *probeSeconds, GoalP99: *goal})
		if err != nil {
			return err
		}
		rep.WriteTable(os.Stdout)
		if *rtJSON != "" {
			return evaluation.WriteJSON(*rtJSON, rep)
		}
		return nil
	}
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *trace != "" {
		if err := writeTrace(*trace, rep); err != nil {
			return err
		}
	}
	return output(rep, *jsonOut, *svgOut, *compare)
}

// besideJob returns the starter of the job run beside the daemon: the
// shell command cmdline (exec'd by sh, so that its CPU time is the job's),
// or this command again with --burn threads. The job runs in a process
// group of its own, which Stop ends.
func besideJob(cmdline string, threads int) func() (*bench.Job, error) {
	return func() (*bench.Job, error) {
		var c *exec.Cmd
		desc := cmdline
		if cmdline == "" {
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			c = exec.Command(self, "--burn", strconv.Itoa(threads))
			desc = fmt.Sprintf("%d-thread SGEMM", threads)
		} else {
			c = exec.Command("sh", "-c", "exec "+cmdline)
		}
		c.Stdout, c.Stderr = io.Discard, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return nil, err
		}
		stop := func() error {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
			err := c.Wait()
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return nil // ended by the signal
			}
			return err
		}
		return &bench.Job{Desc: desc, Stop: stop, CPU: func() (time.Duration, error) { return cputime.Of(c.Process.Pid) }}, nil
	}
}

// writeTrace writes the decisions' latency parts of rep to path as CSV.
func writeTrace(path string, rep *bench.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	if err := bench.WriteTrace(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("--trace %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--trace %s: %w", path, err)
	}
	return nil
}

// output prints the table and writes the JSON and the plot, making their
// folders (out/ by default).
func output(rep *bench.Report, jsonOut, svgOut, compare string) error {
	rep.WriteTable(os.Stdout)
	for _, path := range []string{jsonOut, svgOut} {
		if path != "" {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
		}
	}
	if jsonOut != "" {
		if err := evaluation.WriteJSON(jsonOut, rep); err != nil {
			return err
		}
		fmt.Printf("wrote %s\n", jsonOut)
	}
	if svgOut != "" {
		var others []*bench.Report
		if compare != "" {
			o, err := bench.ReadReport(compare)
			if err != nil {
				return err
			}
			others = append(others, o)
		}
		files, err := plot.SaveBoth(rep.Chart(others...), svgOut)
		if err != nil {
			return fmt.Errorf("write %s: %w", svgOut, err)
		}
		fmt.Printf("wrote %s\n", strings.Join(files, " and "))
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli.Exit("latency", run(ctx, os.Args[1:]))
}
