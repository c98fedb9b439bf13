// Command predictord is the real-time spike-prediction daemon: it receives a
// device's stimulus frames over NATS, keeps every served cell's recent
// stimulus and its own predicted spikes, runs the model whenever a cell's
// prediction is due and publishes the predicted spikes ahead of time.
// docs/protocol.md specifies the wire protocol; the README's "Running the
// daemon" section shows how to run and feed it.
//
// With no --nats-url it starts an embedded NATS server on loopback. SIGTERM
// or SIGINT drains and exits 0; SIGHUP reloads the checkpoint (validated
// first; the old model stays on failure; cells keep their state).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/internal/embednats"
	"rgcpred/internal/service"
	"rgcpred/model"
	"rgcpred/model/engine"
)

// DefaultModel is the shipped checkpoint, relative to the repository root.
const DefaultModel = "models/gpt-a-cat-cpu.ckpt"

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := run(ctx, os.Args[1:], os.Stderr, hup, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "predictord: %v\n", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	natsURL, embedAddr                       string
	user, pass, token, creds, tlsCA, tlsCert string
	tlsKey, name                             string
	devices, modelPath, cells, shard         string
	threads, maxBatch, queueLen              int
	maxLag                                   int64
	silence, stagger                         bool
	metricsAddr, logLevel, logFormat         string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("predictord", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats-url", "", "NATS server URL(s), comma-separated; empty: start an embedded server (see --embedded-addr)")
	fs.StringVar(&o.embedAddr, "embedded-addr", "127.0.0.1:4222", "listen address of the embedded NATS server (if the port is taken, a free port is used)")
	fs.StringVar(&o.user, "nats-user", "", "NATS user name (with --nats-pass)")
	fs.StringVar(&o.pass, "nats-pass", "", "NATS password")
	fs.StringVar(&o.token, "nats-token", "", "NATS authentication token")
	fs.StringVar(&o.creds, "nats-creds", "", "NATS credentials file (JWT + nkey seed)")
	fs.StringVar(&o.tlsCA, "nats-tls-ca", "", "CA certificate file to verify the NATS server")
	fs.StringVar(&o.tlsCert, "nats-tls-cert", "", "client certificate file for NATS TLS (with --nats-tls-key)")
	fs.StringVar(&o.tlsKey, "nats-tls-key", "", "client key file for NATS TLS")
	fs.StringVar(&o.name, "nats-name", "predictord", "connection name shown by the NATS server")
	fs.StringVar(&o.devices, "device", "dev0", "device name(s) to serve, comma-separated")
	fs.StringVar(&o.modelPath, "model", DefaultModel, "checkpoint to serve; a relative path is tried from the working directory, then from the repository root")
	fs.StringVar(&o.cells, "cells", "", "serve only these cluster ids (comma-separated; default every cell of the checkpoint)")
	fs.StringVar(&o.shard, "shard", "0/1", "serve shard i of n: the cells whose index in the sorted cell list is i mod n")
	fs.IntVar(&o.threads, "threads", runtime.NumCPU(), "inference threads")
	fs.IntVar(&o.maxBatch, "max-batch", 64, "most windows per model call (cells due at the same frame beyond it go in further calls)")
	fs.IntVar(&o.queueLen, "queue-len", 8192, "messages queued per device before dropping")
	fs.Int64Var(&o.maxLag, "max-lag", 40, "overload policy: skip a decision when the newest frame is more than this many bins past it (0: never skip)")
	fs.BoolVar(&o.stagger, "stagger", true, "stagger the cells' first windows over one 80-bin horizon (rollout.StartOffset; spreads the model calls over the frames); false: every cell starts at the stream's first frame + 1023, the spec's simultaneous start")
	fs.BoolVar(&o.silence, "publish-silence", true, "also publish \"no spike in the next 80 bins\" decisions")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9464", "listen address of /metrics, /healthz and /readyz (empty: off)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level (debug, info, warn, error)")
	fs.StringVar(&o.logFormat, "log-format", "auto", "log format: json, console, or auto (console when stderr is a terminal)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
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

func parseCells(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 0 {
			return nil, fmt.Errorf("--cells: %q is not a cluster id", f)
		}
		out = append(out, c)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// resolveModel finds the checkpoint: an absolute path as is; a relative
// one from the working directory, else from the repository root (the
// nearest parent of the working directory or of the executable holding
// go.mod of module rgcpred).
func resolveModel(path string) (string, error) {
	if _, err := os.Stat(path); err == nil || filepath.IsAbs(path) {
		if err != nil {
			return "", fmt.Errorf("model checkpoint %s: %w", path, err)
		}
		return path, nil
	}
	var tried []string
	tried = append(tried, path)
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		if root := repoRoot(dir); root != "" {
			p := filepath.Join(root, path)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			tried = append(tried, p)
		}
	}
	return "", fmt.Errorf("model checkpoint %s not found (tried %s); train one with `go run ./cmd/trainer train` or pass --model", path, strings.Join(tried, ", "))
}

func repoRoot(dir string) string {
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

// engineLoader loads checkpoints into the CPU inference engine.
func engineLoader(threads int) service.Loader {
	return func(path string, maxBatch int) (*service.Model, error) {
		ck, err := model.LoadCheckpoint(path)
		if err != nil {
			return nil, err
		}
		if maxBatch <= 0 {
			maxBatch = len(ck.CellIDs)
		}
		eng, err := engine.New(ck, maxBatch, threads)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		name := fmt.Sprintf("%s (data %s, %d steps, val NLL %.4f, trained %s)", ck.Weights.Config.Name(),
			ck.Provenance.Data, ck.Provenance.Steps, ck.Provenance.ValNLL, ck.Provenance.TrainedAt)
		return &service.Model{Predictor: eng, Cells: ck.CellIDs, MaxBatch: eng.MaxBatch(), Name: name, Close: eng.Close}, nil
	}
}

func newLogger(o *options, stderr io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(o.logLevel)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	w := stderr
	switch o.logFormat {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000"}
	case "auto":
		if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000"}
		}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: want json, console or auto", o.logFormat)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("svc", "predictord").Logger(), nil
}

// natsOptions returns the auth and TLS options of the flags.
func natsOptions(o *options) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(o.name)}
	if (o.user == "") != (o.pass == "") {
		return nil, errors.New("--nats-user and --nats-pass go together")
	}
	if o.user != "" {
		opts = append(opts, nats.UserInfo(o.user, o.pass))
	}
	if o.token != "" {
		opts = append(opts, nats.Token(o.token))
	}
	if o.creds != "" {
		if _, err := os.Stat(o.creds); err != nil {
			return nil, fmt.Errorf("--nats-creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(o.creds))
	}
	if o.tlsCA != "" {
		opts = append(opts, nats.RootCAs(o.tlsCA))
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if o.tlsCert != "" {
		opts = append(opts, nats.ClientCert(o.tlsCert, o.tlsKey))
	}
	return opts, nil
}

// run is the whole daemon; it returns when ctx ends (after draining) or on
// a startup error. Each value on hup reloads the checkpoint. If loader is
// nil the CPU engine loads the checkpoint.
func run(ctx context.Context, args []string, stderr io.Writer, hup <-chan os.Signal, loader service.Loader) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		return err
	}
	shard, shards, err := parseShard(o.shard)
	if err != nil {
		return err
	}
	cells, err := parseCells(o.cells)
	if err != nil {
		return err
	}
	if o.threads < 1 {
		return fmt.Errorf("--threads %d: want at least 1", o.threads)
	}
	nopts, err := natsOptions(o)
	if err != nil {
		return err
	}
	modelPath := o.modelPath
	if loader == nil {
		if modelPath, err = resolveModel(o.modelPath); err != nil {
			return err
		}
		loader = engineLoader(o.threads)
	}
	svc, err := service.New(service.Config{
		Devices: splitList(o.devices), ModelPath: modelPath, Load: loader, Cells: cells,
		Shard: shard, Shards: shards, MaxBatch: o.maxBatch, MaxLag: o.maxLag,
		Stagger: o.stagger, PublishSilence: o.silence, QueueLen: o.queueLen, Log: log,
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	url := o.natsURL
	if url == "" {
		host, portStr, err := net.SplitHostPort(o.embedAddr)
		if err != nil {
			return fmt.Errorf("--embedded-addr %q: %w", o.embedAddr, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return fmt.Errorf("--embedded-addr %q: bad port", o.embedAddr)
		}
		if port == 0 {
			port = -1 // nats-server reads 0 as its default port
		}
		srv, err := embednats.Start(host, port)
		if err != nil && port > 0 {
			log.Warn().Err(err).Msg("embedded NATS: port taken, using a free port")
			srv, err = embednats.Start(host, -1)
		}
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		url = srv.ClientURL()
		log.Info().Str("url", url).Msg("embedded NATS server started (no --nats-url)")
	}
	nc, err := nats.Connect(url, append(nopts, svc.ConnOptions()...)...)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", url, err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		log.Warn().Str("url", url).Msg("NATS not reachable yet; retrying in the background")
	}

	var hs *http.Server
	if o.metricsAddr != "" {
		ln, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr %s: %w", o.metricsAddr, err)
		}
		hs = &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("metrics server")
			}
		}()
		log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics, /healthz, /readyz")
	}

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-hup:
				if !ok {
					return
				}
				log.Info().Msg("SIGHUP: reloading the checkpoint")
				_ = svc.Reload() // logs and counts its own failure
			}
		}
	}()

	err = svc.Run(ctx, nc)
	if hs != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = hs.Shutdown(sctx)
		cancel()
	}
	if err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}
