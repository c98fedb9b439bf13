// Command predictord is the real-time spike-prediction daemon: it receives a
// device's stimulus frames over NATS, keeps every served cell's recent
// stimulus and its own predicted spikes, runs the model whenever a cell's
// prediction is due and publishes the predicted spikes ahead of time.
// docs/protocol.md specifies the wire protocol; docs/operations.md's "Running the
// daemon" section shows how to run and feed it.
//
// With no --nats-url it starts an embedded NATS server on loopback,
// requiring the NATS user/password or token when they are given. SIGTERM or
// SIGINT drains and exits 0 (1 if the drain took longer than
// --drain-timeout); a second SIGTERM or SIGINT during the drain exits 1 at
// once. SIGHUP reloads the checkpoint (validated first; the old model stays
// on failure; cells keep their state). docs/operations.md lists the flags,
// environment variables and signals.
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

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/base/cli"
	"rgcpred/base/msgauth"
	"rgcpred/base/rt"
	"rgcpred/model/engine"
	"rgcpred/model/gpu"
	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/serve/embednats"
	"rgcpred/serve/logsink"
	"rgcpred/serve/modelload"
	"rgcpred/serve/natsauth"
	"rgcpred/serve/recorder"
	"rgcpred/serve/service"
	"rgcpred/serve/standby"
)

// DefaultModel is the shipped checkpoint, relative to the repository root.
const DefaultModel = "models/gpt-a-cat-cpu.ckpt"

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	cli.Exit("predictord", run(context.Background(), os.Args[1:], os.Stderr, sigs, nil))
}

// options are the command-line flags, and the values check derives from
// them.
type options struct {
	// natsURL is the NATS server URL(s); empty starts an embedded server.
	natsURL string
	// embedAddr is the embedded server's listen address.
	embedAddr string
	// auth holds the NATS credentials flags.
	auth natsauth.Flags
	// natsConfig is the embedded server's configuration file (users and
	// permissions; empty: none).
	natsConfig string
	// authKeys is the message key file (empty: no message authentication).
	authKeys string
	// tls holds the NATS TLS flags.
	tls natsauth.TLS
	// name is the connection name the NATS server shows.
	name string
	// pingInterval is how often the client pings the NATS server.
	pingInterval time.Duration
	// maxPings is the number of unanswered pings before a reconnect.
	maxPings int
	// staleAfter is how long without frames makes /readyz answer 503.
	staleAfter time.Duration
	// drainTimeout bounds the drain after SIGTERM or SIGINT.
	drainTimeout time.Duration
	// devices are the served device names, comma-separated.
	devices string
	// modelPath is the checkpoint to serve.
	modelPath string
	// ensemble lists more checkpoints averaged with modelPath's.
	ensemble string
	// glmMix is the GLM file mixed with the model (empty: none).
	glmMix string
	// glmWeight is the GLM's share of each distribution.
	glmWeight float64
	// cells lists the served cluster ids (empty: every cell).
	cells string
	// shard is "i/n": serve shard i of n.
	shard string
	// threads is the number of inference threads.
	threads int
	// gather is the number of due windows gathered per model call.
	gather int
	// wholeCalls publishes a call's decisions together at its end.
	wholeCalls bool
	// expect announces each frame's batch to the engine a frame ahead.
	expect bool
	// precision is the engine's arithmetic.
	precision engine.Precision
	// backend holds the GPU backend's flags.
	backend *gpu.Flags
	// maxBatch is the most windows per model call.
	maxBatch int
	// queueLen is the number of frames messages queued per device.
	queueLen int
	// queueBytes bounds the bytes of frames messages queued per device.
	queueBytes int64
	// policy names how a distribution becomes a decision.
	policy string
	// maxLag is the overload threshold in bins.
	maxLag int64
	// resendWait is how long a gap waits for the frames the device resends.
	resendWait time.Duration
	// stagger staggers the cells' first windows over one horizon.
	stagger bool
	// stim is the stimulus mode of the devices' frames.
	stim rgc.StimMode
	// silence also publishes "no spike" decisions.
	silence bool
	// realtime turns the real-time mode on.
	realtime bool
	// cpus lists the CPUs the real-time mode pins the process to.
	cpus string
	// metricsAddr is the listen address of /metrics (empty: off).
	metricsAddr string
	// logLevel is the log level.
	logLevel string
	// logFormat is the log format.
	logFormat string
	// standbyGroup is the hot-standby replica group (empty: off).
	standbyGroup string
	// standbyID is this instance's id in the group.
	standbyID string
	// standbyTTL is the hot-standby lease TTL.
	standbyTTL time.Duration
	// standbyReplicas is the lease bucket's intended replicas (0: 3 on a
	// cluster, else 1).
	standbyReplicas int
	// record is the flight recorder's stream (empty: off).
	record string
	// recordMaxBytes is the size limit of the record stream.
	recordMaxBytes int64
	// recordMaxAge is the age limit of the record stream.
	recordMaxAge time.Duration
	// jsDir enables JetStream on the embedded server, storing there.
	jsDir string

	// embedHost is embedAddr's host (check).
	embedHost string
	// embedPort is embedAddr's port (check).
	embedPort int
	// shardIndex is shard's i (check).
	shardIndex int
	// shardCount is shard's n (check).
	shardCount int
	// cellIDs are the cluster ids of cells (check).
	cellIDs []int
	// decide is the rule policy names (check).
	decide rollout.Policy
	// rtMode is the real-time mode's settings, nil when off (check).
	rtMode *rt.Settings
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{precision: engine.INT8}
	fs := cli.NewFlagSet("predictord", "[flags]",
		"Serve real-time spike predictions over NATS: a device's stimulus frames in, each cell's predicted spikes out.")
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats-url", "", "NATS server URL(s), comma-separated; empty: start an embedded server (see --embedded-addr)")
	fs.StringVar(&o.embedAddr, "embedded-addr", "127.0.0.1:4222",
		"listen address of the embedded NATS server (port 0: a free one, logged; a taken port is an error)")
	fs.StringVar(&o.natsConfig, "nats-config", "",
		"nats-server configuration file for the embedded server: its users and permissions (deploy/nats/predictord.conf); connect with a role's --nats-nkey")
	natsauth.RegisterFlags(fs, &o.auth, &o.tls)
	fs.StringVar(&o.authKeys, "auth-keys", "",
		"message key file: refuse device messages without their authenticator, sign decisions and events; holds the --standby-group key (operations.md, Security)")
	fs.StringVar(&o.name, "nats-name", "predictord", "connection name shown by the NATS server")
	fs.DurationVar(&o.pingInterval, "nats-ping-interval", 2*time.Second,
		"ping the NATS server this often; after --nats-max-pings unanswered pings, reconnect")
	fs.IntVar(&o.maxPings, "nats-max-pings", 3, "unanswered pings before the NATS connection counts as dead")
	fs.DurationVar(&o.staleAfter, "stale-after", 2*time.Second,
		"/readyz answers 503 when a device that sent frames sent none for this long (0: never)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 5*time.Second,
		"on SIGTERM/SIGINT, stop draining after this long and exit 1 (0: no limit); a second signal exits at once")
	fs.StringVar(&o.devices, "device", "dev0", "device name(s) to serve, comma-separated")
	fs.StringVar(&o.modelPath, "model", DefaultModel,
		"checkpoint to serve; a relative path is tried from the working directory, then the repository root")
	fs.StringVar(&o.ensemble, "ensemble", "",
		"more checkpoints (comma-separated) whose probabilities are averaged with --model's: an ensemble of seeds (docs/operations.md)")
	fs.StringVar(&o.glmMix, "glm-mix", "",
		"mix the model with the GLM in this `FILE` (the JSON that trainer glm writes), the GLM reading the windows alone (docs/operations.md)")
	fs.Float64Var(&o.glmWeight, "glm-weight", 0.35, "with --glm-mix: the GLM's share of each distribution, in (0, 1)")
	fs.StringVar(&o.cells, "cells", "", "serve only these cluster ids (comma-separated; default every cell of the checkpoint)")
	fs.StringVar(&o.shard, "shard", "0/1", "serve shard i of n: the cells whose index in the sorted cell list is i mod n")
	fs.IntVar(&o.threads, "threads", runtime.NumCPU(), "inference threads")
	fs.IntVar(&o.gather, "gather", 0, "due windows gathered into one model call while frames wait (0: as many as engine threads; -1: none)")
	fs.BoolVar(&o.wholeCalls, "whole-calls", false,
		"publish a model call's decisions together at its end (default: each as soon as its window is computed)")
	fs.BoolVar(&o.expect, "expect", true,
		"announce each frame's batch to the engine a frame ahead so its threads poll for it (false: less CPU, later batches)")
	fs.Func("precision",
		"engine arithmetic: int8 (default), bf16 or fp32; int8 and bf16 where the CPU has them and pass a parity check (docs/engine.md)",
		func(v string) error {
			p, err := engine.ParsePrecision(v)
			o.precision = p
			return err
		})
	o.backend = gpu.AddFlags(fs)
	fs.IntVar(&o.maxBatch, "max-batch", 64, "most windows per model call (cells due at the same frame beyond it go in further calls)")
	fs.IntVar(&o.queueLen, "queue-len", 8192, "frames messages queued per device before dropping (control messages have their own budget)")
	fs.Int64Var(&o.queueBytes, "queue-bytes", 16<<20, "bytes of frames messages queued per device before dropping")
	fs.StringVar(&o.policy, "policy", "median",
		"how a distribution becomes a decision: median (the paper's), sample[:SEED] or threshold:FILE (docs/evaluation.md)")
	fs.Int64Var(&o.maxLag, "max-lag", 40, "overload: skip a decision when the newest frame is more than this many bins past it (0: never)")
	fs.DurationVar(&o.resendWait, "resend-wait", 100*time.Millisecond, "ask the device to resend a gap's frames and wait this long for them before filling the gap (0: fill at once)")
	fs.BoolVar(&o.stagger, "stagger", true,
		"stagger the cells' first windows over one horizon (rollout.StartOffset); false: all start together")
	fs.TextVar(&o.stim, "stim", rgc.StimCausal,
		"stimulus mode of the devices' frames: causal or zero-phase; a model trained on the other is refused (docs/data.md)")
	fs.BoolVar(&o.silence, "publish-silence", true, "also publish \"no spike in the next 80 bins\" decisions")
	fs.BoolVar(&o.realtime, "realtime", false,
		"real-time mode: threads at SCHED_FIFO, memory locked, polling while windows are due (docs/operations.md, \"Real-time host\")")
	fs.StringVar(&o.cpus, "cpus", "", "with --realtime: pin the process to these CPUs (comma-separated; default: no pinning)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9464", "listen address of /metrics, /healthz and /readyz (empty: off)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level (debug, info, warn, error)")
	fs.StringVar(&o.standbyGroup, "standby-group", "",
		"hot standby: serve as one instance of this replica group (a JetStream lease picks the publisher; empty: off)")
	fs.StringVar(&o.standbyID, "standby-id", "", "this instance's id in the replica group (default: host, pid and a random suffix)")
	fs.DurationVar(&o.standbyTTL, "standby-ttl", standby.DefaultTTL,
		"hot-standby lease TTL: a lost holder is replaced within about this plus a tenth")
	fs.IntVar(&o.standbyReplicas, "standby-replicas", 0,
		"replicas of the hot-standby lease bucket: start-up waits up to 30 s for the cluster to place them (0: 3 on a NATS cluster, else 1)")
	fs.StringVar(&o.record, "record", "",
		"flight recorder: record frames, control, decisions and events in this JetStream stream (empty: off)")
	fs.Int64Var(&o.recordMaxBytes, "record-max-bytes", 1<<30, "size limit of the --record stream (the oldest messages go first; 0: none)")
	fs.DurationVar(&o.recordMaxAge, "record-max-age", 24*time.Hour, "age limit of the --record stream (0: none)")
	fs.StringVar(&o.jsDir, "jetstream-dir", "",
		"enable JetStream on the embedded NATS server, storing here (for --standby-group and --record)")
	fs.StringVar(&o.logFormat, "log-format", "auto", "log format: json, console, or auto (console when stderr is a terminal)")
	if err := cli.NoArgs(fs, args); err != nil {
		return nil, err
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return o, nil
}

// check checks the flags' values and derives the parsed ones (shard,
// cells, policy, real-time mode): every flag check is here.
func (o *options) check() error {
	switch {
	case o.natsConfig != "" && o.natsURL != "":
		return errors.New("--nats-config configures the embedded server: not with --nats-url (start nats-server -c with it instead)")
	case o.pingInterval <= 0:
		return fmt.Errorf("--nats-ping-interval %v: want > 0", o.pingInterval)
	case o.maxPings < 1:
		return fmt.Errorf("--nats-max-pings %d: want at least 1", o.maxPings)
	case o.standbyReplicas < 0 || o.standbyReplicas > 5:
		return fmt.Errorf("--standby-replicas %d: want 0 (3 on a cluster, else 1) to 5, JetStream's most", o.standbyReplicas)
	case o.staleAfter < 0:
		return fmt.Errorf("--stale-after %v: want >= 0", o.staleAfter)
	case o.drainTimeout < 0:
		return fmt.Errorf("--drain-timeout %v: want >= 0", o.drainTimeout)
	case o.threads < 1:
		return fmt.Errorf("--threads %d: want at least 1", o.threads)
	case o.glmMix != "" && !(o.glmWeight > 0 && o.glmWeight < 1):
		return fmt.Errorf("--glm-weight %v: want a value in (0, 1)", o.glmWeight)
	case o.cpus != "" && !o.realtime:
		return errors.New("--cpus: pinning is part of the real-time mode: add --realtime")
	}
	var err error
	if o.embedHost, o.embedPort, err = embednats.ParseAddr(o.embedAddr); err != nil {
		return fmt.Errorf("--embedded-addr: %w", err)
	}
	if o.shardIndex, o.shardCount, err = parseShard(o.shard); err != nil {
		return err
	}
	if o.cellIDs, err = parseCells(o.cells); err != nil {
		return err
	}
	if o.decide, err = rollout.ParsePolicy(o.policy); err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	if o.realtime {
		cpus, err := cli.Ints(o.cpus)
		if err != nil {
			return fmt.Errorf("--cpus: %w", err)
		}
		o.rtMode = &rt.Settings{CPUs: cpus}
		if err := o.rtMode.Check(); err != nil {
			return fmt.Errorf("--cpus: %w", err)
		}
	}
	return nil
}

// parseShard parses "i/n".
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// parseCells parses --cells, cluster ids (none: every cell of the model).
func parseCells(s string) ([]int, error) {
	ids, err := cli.Ints(s)
	if err != nil {
		return nil, fmt.Errorf("--cells: %w", err)
	}
	for _, id := range ids {
		if id < 0 {
			return nil, fmt.Errorf("--cells: %d is not a cluster id", id)
		}
	}
	return ids, nil
}

// newRegistry returns the daemon's metrics registry holding the metrics of
// the command itself, the log lines dropped; service.New adds the rest.
func newRegistry() (*prometheus.Registry, prometheus.Counter) {
	reg := prometheus.NewRegistry()
	logDropped := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "predictord", Name: "log_lines_dropped_total",
		Help: "Log lines dropped because the log output could not keep up."})
	reg.MustRegister(logDropped)
	return reg, logDropped
}

// run is the whole daemon; it returns when ctx ends or a SIGINT/SIGTERM
// arrives on sigs (after draining), or on a start-up error. A second
// SIGINT/SIGTERM during the drain makes it return service.ErrAborted at
// once. Each SIGHUP on sigs reloads the checkpoint (Service.Serve). If
// loader is nil the CPU engine loads the checkpoint.
func run(ctx context.Context, args []string, stderr io.Writer, sigs <-chan os.Signal, loader service.Loader) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	reg, logDropped := newRegistry()
	log, sink, err := logsink.New("predictord", o.logLevel, o.logFormat, stderr, logDropped)
	if err != nil {
		return err
	}
	defer func() {
		if err := sink.Close(2 * time.Second); err != nil {
			fmt.Fprintf(stderr, "predictord: %v\n", err)
		}
	}()
	auth, err := natsauth.Resolve(o.auth, os.Getenv)
	if err != nil {
		return err
	}
	nopts, err := natsauth.Options(o.name, o.natsURL == "", auth, o.tls)
	if err != nil {
		return err
	}
	modelPath := o.modelPath
	if loader == nil {
		if modelPath, err = modelload.Resolve(o.modelPath); err != nil {
			return err
		}
		cuda, err := o.backend.CUDA()
		if err != nil {
			return err
		}
		loader = modelload.Engine(o.threads, o.precision)
		if cuda {
			gopts, err := o.backend.Options(o.maxBatch)
			if err != nil {
				return err
			}
			loader = modelload.GPU(gopts)
		}
	}
	if o.ensemble != "" {
		var others []string
		for _, p := range cli.List(o.ensemble) {
			r, err := modelload.Resolve(p)
			if err != nil {
				return fmt.Errorf("--ensemble: %w", err)
			}
			others = append(others, r)
		}
		loader = modelload.Ensemble(loader, others)
	}
	if o.glmMix != "" {
		loader = modelload.WithGLM(loader, o.glmMix, o.glmWeight)
	}
	var keys msgauth.KeyFile
	if o.authKeys != "" {
		if keys, err = msgauth.LoadKeyFile(o.authKeys); err != nil {
			return fmt.Errorf("--auth-keys: %w", err)
		}
	}
	svc, err := service.New(service.Config{
		Keys: keys.Devices, StandbyKeys: keys.Groups, Devices: cli.List(o.devices), ModelPath: modelPath, Load: loader, Cells: o.cellIDs,
		Shard: o.shardIndex, Shards: o.shardCount, MaxBatch: o.maxBatch, MaxLag: o.maxLag, ResendWait: o.resendWait, Gather: o.gather, NoExpect: !o.expect, WholeCalls: o.wholeCalls,
		Replica: o.standbyGroup != "",
		Stagger: o.stagger, StimMode: o.stim, PublishSilence: o.silence, QueueLen: o.queueLen, QueueBytes: o.queueBytes,
		Policy: o.decide, RealTime: o.rtMode, Log: log, Registry: reg,
		PingInterval: o.pingInterval, MaxPingsOutstanding: o.maxPings, StaleAfter: o.staleAfter, DrainTimeout: o.drainTimeout,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			log.Warn().Err(err).Msg("close")
		}
	}()

	url := o.natsURL
	if url == "" {
		eo := embednats.Options{Host: o.embedHost, Port: o.embedPort, Username: auth.User, Password: auth.Pass, Token: auth.Token,
			JetStream: o.jsDir != "", StoreDir: o.jsDir, ConfigFile: o.natsConfig}
		if o.natsConfig != "" {
			eo.Username, eo.Password, eo.Token = "", "", "" // the file names the users; these are this connection's
		}
		srv, err := embednats.StartOptions(eo)
		if err != nil {
			return fmt.Errorf("--embedded-addr %s: %w (is another NATS server running? connect to it with --nats-url, "+
				"or use port 0 for a free port)", o.embedAddr, err)
		}
		defer srv.Shutdown()
		url = srv.ClientURL()
		log.Info().Str("url", url).Str("auth", auth.Mode()).Msg("embedded NATS server started (no --nats-url)")
	}
	copts := append(nopts, svc.ConnOptions()...)
	if o.standbyGroup != "" {
		// A decision buffered across a reconnect could go out after a
		// successor's copy (docs/operations.md, "Hot standby").
		copts = append(copts, nats.ReconnectBufSize(-1))
	}
	nc, err := nats.Connect(url, copts...)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", natsauth.RedactURL(url), err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		log.Warn().Str("url", natsauth.RedactURL(url)).Str("auth", auth.Mode()).Msg("NATS not reachable yet; retrying in the background")
	}

	stopJS, err := svc.EnableJetStream(ctx, nc, service.JetStreamFeatures{
		Standby: standby.GroupConfig{Group: o.standbyGroup, ID: o.standbyID, TTL: o.standbyTTL, Replicas: o.standbyReplicas},
		Record:  recorder.Config{Stream: o.record, MaxBytes: o.recordMaxBytes, MaxAge: o.recordMaxAge}})
	if err != nil {
		return err
	}
	defer stopJS()

	if o.metricsAddr != "" {
		stop, err := svc.ListenHTTP(o.metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer stop()
	}

	if err := svc.Serve(ctx, nc, sigs); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}
