// Command replay is the device simulator: it streams a recording's stimulus
// over NATS to a running predictord at 992 Hz against the wall clock (or
// faster, or as fast as the daemon takes it), starting each cell with its
// recorded spike history, collects the predicted spikes, reports late ones,
// writes the predicted spike trains and scores them against the recorded
// spikes with the evaluator's metrics (package rollout).
//
//	replay --data data/chicken-17-08-21 [--nats-url nats://127.0.0.1:4222]
//	       [--device dev0] [--split test|train|val|all] [--speed 1 | --as-fast-as-possible]
//	       [--cells quality|all|ID,ID,...] [--seconds S] [--out DIR]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats.go"

	"rgcpred/base/cli"
	"rgcpred/base/msgauth"
	"rgcpred/bench"
	"rgcpred/bench/history"
	"rgcpred/bench/replay"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/serve/modelload"
	"rgcpred/serve/natsauth"
	"rgcpred/serve/service"
	"rgcpred/stream"
)

// deviceKeys reads the keys of device from a message key file.
func deviceKeys(path, device string) (msgauth.DeviceKeys, error) {
	ks, err := msgauth.LoadKeys(path)
	if err != nil {
		return msgauth.DeviceKeys{}, fmt.Errorf("--auth-keys: %w", err)
	}
	k, ok := ks[device]
	if !ok {
		return msgauth.DeviceKeys{}, fmt.Errorf("--auth-keys %s: no keys of device %s", path, device)
	}
	return k, nil
}

// groupKey reads the standby group's key from a message key file, for
// auditing a group's recording: nil without one, an error with several
// (the audit admits one group's announcements).
func groupKey(path string) ([]byte, error) {
	kf, err := msgauth.LoadKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("--auth-keys: %w", err)
	}
	if len(kf.Groups) > 1 {
		return nil, fmt.Errorf("--auth-keys %s: standby keys of %d groups: give the audit a file with its group's only", path, len(kf.Groups))
	}
	for _, k := range kf.Groups {
		return k, nil
	}
	return nil, nil
}

// options are the command's flags.
type options struct {
	data      string
	natsURL   string
	auth      natsauth.Flags
	tls       natsauth.TLS
	authKeys  string
	device    string
	split     string
	speed     float64
	afap      bool
	cells     string
	seconds   float64
	out       string
	timeout   time.Duration
	seed      uint64
	quiet     bool
	maxFrames int
	embedded  bool
	ckpt      string
	threads   int
	oracle    bool
	listCells bool
	stagger   bool
	stim      rgc.StimMode
	raster    rasterOptions
	audit     auditOptions
	check     checkOptions
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := cli.NewFlagSet("replay", "--data DIR [flags]",
		"Play a recording's stimulus to predictord as a device would, and score the decisions it sends back.")
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.data, "data", "", "recording directory (required), e.g. data/chicken-17-08-21 or a directory that trainer synth wrote")
	fs.StringVar(&o.natsURL, "nats-url", nats.DefaultURL, "NATS server predictord listens on")
	natsauth.RegisterFlags(fs, &o.auth, &o.tls)
	fs.StringVar(&o.authKeys, "auth-keys", "",
		"message key file (docs/operations.md, Security): sign frames and control, drop unsigned decisions; --from-stream's audit key")
	fs.StringVar(&o.device, "device", "dev0", "device name (the NATS subjects rgc.<device>.*)")
	fs.StringVar(&o.split, "split", "test", "stretch to replay: train, val, test or all")
	fs.Float64Var(&o.speed, "speed", 1, "pacing: 1 = real time (991.82 frames/s), N = N times faster")
	fs.BoolVar(&o.afap, "as-fast-as-possible", false,
		"no pacing: send frames as fast as the daemon decides (flow control: wait for the outstanding window's decisions)")
	fs.StringVar(&o.cells, "cells", "quality", "cells to replay: quality, all, or comma-separated cluster ids")
	fs.Float64Var(&o.seconds, "seconds", 0, "replay only the first S seconds after the 1024-bin history (0: the whole stretch)")
	fs.StringVar(&o.out, "out", "", "directory for the predicted and recorded spike trains (.npy) and summary.json")
	fs.DurationVar(&o.timeout, "decision-timeout", 10*time.Second, "how long to wait for an outstanding decision")
	fs.Uint64Var(&o.seed, "seed", 1, "bootstrap seed of the metric summaries")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	fs.IntVar(&o.maxFrames, "max-frames-per-msg", 32, "most frames per message when a paced replay catches up")
	fs.BoolVar(&o.embedded, "embedded", false,
		"start an in-process predictord (serving --ckpt) on an embedded NATS server instead of connecting to --nats-url")
	fs.StringVar(&o.ckpt, "ckpt", "models/gpt-a-cat-cpu.ckpt", "checkpoint the --embedded daemon serves")
	fs.IntVar(&o.threads, "threads", runtime.NumCPU(), "engine threads of the --embedded daemon")
	fs.BoolVar(&o.oracle, "oracle", false,
		"with --embedded: serve the exact oracle of a synthetic recording (truth.json in --data) instead of --ckpt")
	fs.BoolVar(&o.stagger, "stagger", true, "with --embedded: the embedded daemon staggers the cells' starts, as predictord's --stagger")
	fs.TextVar(&o.stim, "stim", rgc.StimCausal,
		"stimulus mode of the frames sent: causal or zero-phase; the daemon's (its status says which)")
	fs.BoolVar(&o.listCells, "list-cells", false,
		"print the cluster ids --cells selects, comma-separated (for predictord --cells), and exit")
	o.raster.register(fs)
	o.audit.register(fs)
	o.check.register(fs)
	if err := cli.NoArgs(fs, args); err != nil {
		return nil, err
	}
	if o.data == "" && o.audit.stream == "" {
		return nil, cli.Usagef(fs, "--data is required")
	}
	if o.afap {
		o.speed = 0
	} else if !(o.speed > 0) {
		return nil, fmt.Errorf("--speed %v must be positive (or use --as-fast-as-possible)", o.speed)
	}
	if o.seconds < 0 {
		return nil, fmt.Errorf("--seconds %v must not be negative", o.seconds)
	}
	if o.oracle && !o.embedded {
		return nil, errors.New("--oracle needs --embedded (the oracle runs in the in-process daemon)")
	}
	if o.threads < 1 {
		return nil, fmt.Errorf("--threads %d: want at least 1", o.threads)
	}
	if err := stream.CheckDevice(o.device); err != nil {
		return nil, fmt.Errorf("--device: %w", err)
	}
	if err := o.raster.check(); err != nil {
		return nil, err
	}
	return o, nil
}

// stretch returns the bins [from, to) of the split to replay.
func stretch(rec *rgc.Recording, split string, seconds float64) (from, to int, err error) {
	if split == "all" {
		from, to = 0, rec.Bins
	} else {
		s, err := rgc.ParseSplit(split)
		if err != nil {
			return 0, 0, fmt.Errorf("--split: %w (or all)", err)
		}
		from, to = rec.SplitRange(s)
	}
	if seconds > 0 {
		to = min(to, from+rgc.WindowBins+int(seconds*rgc.BinRateHz))
	}
	if to-from < rgc.WindowBins+1 {
		return 0, 0, fmt.Errorf("split %s of %s has %d bins, too short for a %d-bin history and a step", split, rec.Name, to-from, rgc.WindowBins)
	}
	return from, to, nil
}

// selectCells resolves --cells to cluster ids.
func selectCells(rec *rgc.Recording, spec string) ([]int, error) {
	idx, err := rec.SelectCells(spec)
	if err != nil {
		return nil, fmt.Errorf("--cells: %w", err)
	}
	ids := make([]int, len(idx))
	for i, k := range idx {
		ids[i] = rec.Cells[k].ClusterID
	}
	return ids, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.audit.stream != "" {
		return fromStream(ctx, o, stdout)
	}
	load := func(path string, maxBatch int) (*service.Model, error) {
		return bench.LoadEngine(path, maxBatch, o.threads, engine.FP32)
	}
	if o.oracle {
		o.ckpt = "oracle of " + o.data
		load = func(string, int) (*service.Model, error) { return modelload.Oracle(o.data, o.stim) }
	}
	return replayWith(ctx, o, stdout, stderr, load)
}

// replayWith runs a replay; load loads the model of an --embedded daemon.
func replayWith(ctx context.Context, o *options, stdout, stderr io.Writer, load service.Loader) error {
	rec, err := rgc.LoadMode(o.data, o.stim)
	if err != nil {
		return err
	}
	from, to, err := stretch(rec, o.split, o.seconds)
	if err != nil {
		return err
	}
	ids, err := selectCells(rec, o.cells)
	if err != nil {
		return err
	}
	if o.listCells {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.Itoa(id)
		}
		fmt.Fprintln(stdout, strings.Join(s, ","))
		return nil
	}
	if o.embedded {
		url, stop, err := startEmbedded(ctx, o, ids, load)
		if err != nil {
			return err
		}
		defer stop()
		o.natsURL = url
		fmt.Fprintf(stderr, "replay: embedded predictord serving %s on %s\n", o.ckpt, url)
	}
	nc, err := connect(o, "replay "+o.device)
	if err != nil {
		return fmt.Errorf("%w (is predictord or nats-server running?)", err)
	}
	defer nc.Close()
	pub, err := stream.NewPublisher(nc, o.device)
	if err != nil {
		return err
	}
	if o.authKeys != "" {
		k, err := deviceKeys(o.authKeys, o.device)
		if err != nil {
			return err
		}
		if err := pub.UseKeys(k); err != nil {
			return err
		}
	}
	mode := fmt.Sprintf("at %gx real time", o.speed)
	if o.speed == 0 {
		mode = "as fast as possible (flow control)"
	}
	fmt.Fprintf(stderr, "replay: %s, split %s (bins %d..%d, %.1f s after the %d-bin history), %d cells, device %s, %s\n",
		rec.Name, o.split, from, to, float64(to-from-rgc.WindowBins)/rgc.BinRateHz, rgc.WindowBins, len(ids), o.device, mode)
	cfg := replay.Config{
		Rec: rec, From: from, To: to, Cells: ids, Speed: o.speed,
		MaxFramesPerMsg: o.maxFrames, DecisionTimeout: o.timeout, History: history.NewLog(),
	}
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd())
	}
	if !o.quiet {
		start := time.Now()
		cfg.Progress = func(sent, total int) {
			// On a terminal one line rewritten in place; elsewhere (a log
			// file, a pipe) one plain line per report.
			if tty {
				fmt.Fprintf(stderr, "\rreplay: %5.1f%% of %d frames, %.0f s", 100*float64(sent)/float64(total), total, time.Since(start).Seconds())
			} else {
				fmt.Fprintf(stderr, "replay: %5.1f%% of %d frames, %.0f s\n", 100*float64(sent)/float64(total), total, time.Since(start).Seconds())
			}
		}
	}
	res, err := replay.Run(ctx, pub, cfg)
	if !o.quiet && cfg.Progress != nil && tty {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return err
	}
	var verdict *history.Report
	if o.check.on {
		if verdict, err = checkHistory(ctx, o, rec, res, cfg.History, stderr); err != nil {
			return err
		}
	}
	if d := pub.Dropped(); d != (stream.DropStats{}) {
		fmt.Fprintf(stderr, "replay: dropped decisions: %d without the daemon's authenticator, %d with a wrong one, %d for frames not sent\n",
			d.AuthMissing, d.AuthInvalid, d.Ahead)
	}
	if f := pub.FenceStats(); f.Late > 0 {
		fmt.Fprintf(stderr, "replay: dropped %d decisions that came after a later window of their cell\n", f.Late)
	}
	ev, err := evaluate(rec, res, res.Spikes, o.seed)
	if err != nil {
		return err
	}
	var evOnTime *replayScores
	var trainsOnTime [][]int
	if res.Late.Late > 0 {
		trainsOnTime = onTime(res)
		if evOnTime, err = evaluate(rec, res, trainsOnTime, o.seed); err != nil {
			return err
		}
	}
	printReport(stdout, rec, o, res, verdict, cfg.History, ev, evOnTime)
	if o.out != "" {
		if err := writeOutputs(o, rec, res, ev, evOnTime); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s/predicted/cell_<id>.npy, %s/recorded/cell_<id>.npy and %s/summary.json\n", o.out, o.out, o.out)
	}
	if o.raster.path != "" {
		return o.raster.write(stdout, rec, o.device, res, trainsOnTime)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli.Exit("replay", run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// connect connects to --nats-url with the credential and TLS flags, as
// predictord does.
func connect(o *options, name string) (*nats.Conn, error) {
	auth, err := natsauth.Resolve(o.auth, os.Getenv)
	if err != nil {
		return nil, err
	}
	opts, err := natsauth.Options(name, false, auth, o.tls)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.natsURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", natsauth.RedactURL(o.natsURL), err)
	}
	return nc, nil
}
