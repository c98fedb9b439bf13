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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/diode"

	"rgcpred/internal/embednats"
	"rgcpred/internal/service"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rollout"
)

// DefaultModel is the shipped checkpoint, relative to the repository root.
const DefaultModel = "models/gpt-a-cat-cpu.ckpt"

// Environment variables read for the NATS credentials (docs/operations.md).
const (
	envUser     = "NATS_USER"
	envPassword = "NATS_PASSWORD"
	envToken    = "NATS_TOKEN"
	envCreds    = "NATS_CREDS"
)

// logBufferLines is the capacity of the log writer's buffer: lines logged
// while it is full are dropped (and counted) rather than block the caller.
const logBufferLines = 4096

// errAborted is returned by run when a second termination signal cut the
// drain short.
var errAborted = errors.New("second signal while draining: exited without finishing the drain")

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	if err := run(context.Background(), os.Args[1:], os.Stderr, sigs, nil); err != nil {
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
	passFile, tokenFile                      string
	tlsKey, name                             string
	devices, modelPath, cells, shard         string
	policy                                   string
	queueBytes                               int64
	threads, maxBatch, queueLen, maxPings    int
	maxLag                                   int64
	silence, stagger                         bool
	metricsAddr, logLevel, logFormat         string
	pingInterval, staleAfter, drainTimeout   time.Duration
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("predictord", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats-url", "", "NATS server URL(s), comma-separated; empty: start an embedded server (see --embedded-addr)")
	fs.StringVar(&o.embedAddr, "embedded-addr", "127.0.0.1:4222", "listen address of the embedded NATS server; a taken port is a start-up error, port 0 picks a free one (the URL is logged)")
	fs.StringVar(&o.user, "nats-user", "", "NATS user name, with a password (or $"+envUser+"); the embedded server then requires them")
	fs.StringVar(&o.pass, "nats-pass", "", "NATS password (visible in ps: prefer --nats-pass-file or $"+envPassword+")")
	fs.StringVar(&o.passFile, "nats-pass-file", "", "file holding the NATS password (trailing newline ignored)")
	fs.StringVar(&o.token, "nats-token", "", "NATS authentication token, required by the embedded server too (visible in ps: prefer --nats-token-file or $"+envToken+")")
	fs.StringVar(&o.tokenFile, "nats-token-file", "", "file holding the NATS token (trailing newline ignored)")
	fs.StringVar(&o.creds, "nats-creds", "", "NATS credentials file, user JWT + nkey seed (or $"+envCreds+"); needs --nats-url")
	fs.StringVar(&o.tlsCA, "nats-tls-ca", "", "CA certificate file to verify the NATS server")
	fs.StringVar(&o.tlsCert, "nats-tls-cert", "", "client certificate file for NATS TLS (with --nats-tls-key)")
	fs.StringVar(&o.tlsKey, "nats-tls-key", "", "client key file for NATS TLS")
	fs.StringVar(&o.name, "nats-name", "predictord", "connection name shown by the NATS server")
	fs.DurationVar(&o.pingInterval, "nats-ping-interval", 2*time.Second, "ping the NATS server this often; after --nats-max-pings unanswered pings the connection counts as dead and is reconnected")
	fs.IntVar(&o.maxPings, "nats-max-pings", 3, "unanswered pings before the NATS connection counts as dead")
	fs.DurationVar(&o.staleAfter, "stale-after", 2*time.Second, "/readyz answers 503 (and a warning is logged) when a device that has sent frames sent none for this long (0: never)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 5*time.Second, "on SIGTERM/SIGINT, give up draining after this long and exit 1 (0: no limit); a second signal exits at once")
	fs.StringVar(&o.devices, "device", "dev0", "device name(s) to serve, comma-separated")
	fs.StringVar(&o.modelPath, "model", DefaultModel, "checkpoint to serve; a relative path is tried from the working directory, then from the repository root")
	fs.StringVar(&o.cells, "cells", "", "serve only these cluster ids (comma-separated; default every cell of the checkpoint)")
	fs.StringVar(&o.shard, "shard", "0/1", "serve shard i of n: the cells whose index in the sorted cell list is i mod n")
	fs.IntVar(&o.threads, "threads", runtime.NumCPU(), "inference threads")
	fs.IntVar(&o.maxBatch, "max-batch", 64, "most windows per model call (cells due at the same frame beyond it go in further calls)")
	fs.IntVar(&o.queueLen, "queue-len", 8192, "frames messages queued per device before dropping (control messages have their own budget)")
	fs.Int64Var(&o.queueBytes, "queue-bytes", 16<<20, "bytes of frames messages queued per device before dropping")
	fs.StringVar(&o.policy, "policy", "median", "how a window's distribution becomes a decision: median (the paper's rule), sample[:SEED] (draw the class; seeded per cell and window, so replays repeat), threshold:FILE (per-cell thresholds on P(spike within 80 bins), from trainer fit-threshold)")
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
	switch {
	case o.pingInterval <= 0:
		return nil, fmt.Errorf("--nats-ping-interval %v: want > 0", o.pingInterval)
	case o.maxPings < 1:
		return nil, fmt.Errorf("--nats-max-pings %d: want at least 1", o.maxPings)
	case o.staleAfter < 0:
		return nil, fmt.Errorf("--stale-after %v: want >= 0", o.staleAfter)
	case o.drainTimeout < 0:
		return nil, fmt.Errorf("--drain-timeout %v: want >= 0", o.drainTimeout)
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
		return &service.Model{Predictor: eng, Cells: ck.CellIDs, MaxBatch: eng.MaxBatch(), Name: name, Close: eng.Close,
			BinRateHz: ck.BinRateHz, WindowBins: ck.WindowBins, Horizon: ck.Horizon}, nil
	}
}

// logSink is the daemon's log writer: a non-blocking buffer (a diode) in
// front of the output, so that logging never waits for a slow stderr on a
// processing goroutine. Lines logged while the buffer is full are dropped
// and counted.
type logSink struct {
	w       diode.Writer
	dropped atomic.Uint64
}

// Close writes out the buffered lines and stops the writer, waiting at most
// timeout for a blocked output. The output itself is not closed.
func (l *logSink) Close(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- l.w.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("log output blocked: buffered lines lost after %v", timeout)
	}
}

// noClose hides the output's Close from the diode, which would close it.
type noClose struct{ io.Writer }

// newLogger returns the daemon's logger, writing through a logSink to
// stderr; dropped counts the lines lost to a full buffer (nil: not
// counted). Close the sink on exit.
func newLogger(o *options, stderr io.Writer, dropped prometheus.Counter) (zerolog.Logger, *logSink, error) {
	lvl, err := zerolog.ParseLevel(o.logLevel)
	if err != nil {
		return zerolog.Logger{}, nil, fmt.Errorf("--log-level: %w", err)
	}
	var w io.Writer = noClose{stderr}
	switch o.logFormat {
	case "json":
	case "console":
		w = noClose{zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000"}}
	case "auto":
		if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			w = noClose{zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000"}}
		}
	default:
		return zerolog.Logger{}, nil, fmt.Errorf("--log-format %q: want json, console or auto", o.logFormat)
	}
	sink := &logSink{}
	var log zerolog.Logger
	// The alert runs on the diode's writing goroutine when it finds lines
	// overwritten; the note it logs goes through the diode like any line.
	sink.w = diode.NewWriter(w, logBufferLines, 0, func(missed int) {
		sink.dropped.Add(uint64(missed))
		if dropped != nil {
			dropped.Add(float64(missed))
		}
		log.Warn().Int("lines", missed).Uint64("total", sink.dropped.Load()).Msg("log output too slow: lines dropped")
	})
	log = zerolog.New(sink.w).Level(lvl).With().Timestamp().Str("svc", "predictord").Logger()
	return log, sink, nil
}

// source is one place a setting may come from: a flag, a file named by a
// flag, or an environment variable.
type source struct {
	name  string // how the user wrote it: "--nats-pass", "$NATS_PASSWORD"
	value string // the value, or the file's path when file is set
	file  bool
}

// oneOf returns the setting what from the one source that gives it (""
// if none does). Two sources are an error rather than one silently
// overriding the other. A file's content is read with its trailing line
// break removed and must not be empty.
func oneOf(what string, srcs ...source) (string, error) {
	var got *source
	for i := range srcs {
		if srcs[i].value == "" {
			continue
		}
		if got != nil {
			return "", fmt.Errorf("%s given by both %s and %s: give it once", what, got.name, srcs[i].name)
		}
		got = &srcs[i]
	}
	switch {
	case got == nil:
		return "", nil
	case !got.file:
		return got.value, nil
	}
	b, err := os.ReadFile(got.value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", got.name, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s %s: empty file", got.name, got.value)
	}
	return v, nil
}

// natsAuth are the NATS credentials, from flags, files or the environment.
type natsAuth struct {
	user, pass, token, creds string
}

// mode names the authentication in logs (never the secrets).
func (a natsAuth) mode() string {
	switch {
	case a.creds != "":
		return "creds"
	case a.user != "":
		return "user"
	case a.token != "":
		return "token"
	}
	return "none"
}

// resolveAuth collects the credentials from the flags, the files they name
// and the environment (getenv); each from one place only.
func resolveAuth(o *options, getenv func(string) string) (natsAuth, error) {
	var a natsAuth
	var err error
	if a.user, err = oneOf("NATS user", source{name: "--nats-user", value: o.user}, source{name: "$" + envUser, value: getenv(envUser)}); err != nil {
		return a, err
	}
	if a.pass, err = oneOf("NATS password", source{name: "--nats-pass", value: o.pass},
		source{name: "--nats-pass-file", value: o.passFile, file: true}, source{name: "$" + envPassword, value: getenv(envPassword)}); err != nil {
		return a, err
	}
	if a.token, err = oneOf("NATS token", source{name: "--nats-token", value: o.token},
		source{name: "--nats-token-file", value: o.tokenFile, file: true}, source{name: "$" + envToken, value: getenv(envToken)}); err != nil {
		return a, err
	}
	credsFrom := "--nats-creds"
	if o.creds == "" {
		credsFrom = "$" + envCreds
	}
	if a.creds, err = oneOf("NATS credentials file", source{name: "--nats-creds", value: o.creds}, source{name: "$" + envCreds, value: getenv(envCreds)}); err != nil {
		return a, err
	}
	if (a.user == "") != (a.pass == "") {
		return a, errors.New("the NATS user (--nats-user, $" + envUser + ") and password (--nats-pass, --nats-pass-file, $" + envPassword + ") go together")
	}
	if a.creds != "" {
		if err := checkCreds(a.creds); err != nil {
			return a, fmt.Errorf("%s: %w", credsFrom, err)
		}
	}
	return a, nil
}

// checkCreds reads a NATS credentials file and checks that it holds a valid,
// unexpired user JWT and the user's nkey seed matching it, so that a bad file
// is a start-up error rather than a connection that keeps failing.
func checkCreds(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	tok, err := nkeys.ParseDecoratedJWT(b)
	if err != nil {
		return fmt.Errorf("%s: no user JWT: %w", path, err)
	}
	claims, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return fmt.Errorf("%s: no valid user JWT: %w", path, err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return fmt.Errorf("%s: no user nkey seed: %w", path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("%s: nkey seed: %w", path, err)
	}
	if pub != claims.Subject {
		return fmt.Errorf("%s: the nkey seed (%s) is not the JWT's user (%s)", path, pub, claims.Subject)
	}
	if claims.Expires != 0 && time.Unix(claims.Expires, 0).Before(time.Now()) {
		return fmt.Errorf("%s: the user JWT expired at %s", path, time.Unix(claims.Expires, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// natsOptions returns the auth and TLS options of the flags. The embedded
// server (no --nats-url) takes a user/password or a token, no credentials
// file and no TLS.
func natsOptions(o *options, a natsAuth) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(o.name)}
	if o.natsURL == "" {
		switch {
		case a.creds != "":
			return nil, errors.New("a NATS credentials file needs --nats-url: the embedded server has no accounts (use a user/password or token)")
		case o.tlsCA != "" || o.tlsCert != "":
			return nil, errors.New("--nats-tls-* need --nats-url: the embedded server listens on loopback without TLS")
		case a.user != "" && a.token != "":
			return nil, errors.New("the embedded server takes a NATS user/password or a token, not both")
		}
	}
	if a.user != "" {
		opts = append(opts, nats.UserInfo(a.user, a.pass))
	}
	if a.token != "" {
		opts = append(opts, nats.Token(a.token))
	}
	if a.creds != "" {
		opts = append(opts, nats.UserCredentials(a.creds))
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

// run is the whole daemon; it returns when ctx ends or a SIGINT/SIGTERM
// arrives on sigs (after draining), or on a start-up error. A second
// SIGINT/SIGTERM during the drain makes it return errAborted at once. Each
// SIGHUP on sigs reloads the checkpoint. If loader is nil the CPU engine
// loads the checkpoint.
func run(ctx context.Context, args []string, stderr io.Writer, sigs <-chan os.Signal, loader service.Loader) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	logDropped := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "predictord", Name: "log_lines_dropped_total",
		Help: "Log lines dropped because the log output could not keep up."})
	reg.MustRegister(logDropped)
	log, sink, err := newLogger(o, stderr, logDropped)
	if err != nil {
		return err
	}
	defer func() {
		if err := sink.Close(2 * time.Second); err != nil {
			fmt.Fprintf(stderr, "predictord: %v\n", err)
		}
	}()
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
	auth, err := resolveAuth(o, os.Getenv)
	if err != nil {
		return err
	}
	nopts, err := natsOptions(o, auth)
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
	policy, err := rollout.ParsePolicy(o.policy)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	svc, err := service.New(service.Config{
		Devices: splitList(o.devices), ModelPath: modelPath, Load: loader, Cells: cells,
		Shard: shard, Shards: shards, MaxBatch: o.maxBatch, MaxLag: o.maxLag,
		Stagger: o.stagger, PublishSilence: o.silence, QueueLen: o.queueLen, QueueBytes: o.queueBytes, Policy: policy, Log: log, Registry: reg,
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
		host, portStr, err := net.SplitHostPort(o.embedAddr)
		if err != nil {
			return fmt.Errorf("--embedded-addr %q: %w", o.embedAddr, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			return fmt.Errorf("--embedded-addr %q: bad port", o.embedAddr)
		}
		if port == 0 {
			port = -1 // nats-server reads 0 as its default port
		}
		srv, err := embednats.StartOptions(embednats.Options{Host: host, Port: port, Username: auth.user, Password: auth.pass, Token: auth.token})
		if err != nil {
			return fmt.Errorf("--embedded-addr %s: %w (is another NATS server running? connect to it with --nats-url, or use port 0 for a free port)", o.embedAddr, err)
		}
		defer srv.Shutdown()
		url = srv.ClientURL()
		log.Info().Str("url", url).Str("auth", auth.mode()).Msg("embedded NATS server started (no --nats-url)")
	}
	nc, err := nats.Connect(url, append(nopts, svc.ConnOptions()...)...)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", url, err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		log.Warn().Str("url", url).Str("auth", auth.mode()).Msg("NATS not reachable yet; retrying in the background")
	}

	if o.metricsAddr != "" {
		ln, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr %s: %w", o.metricsAddr, err)
		}
		hs := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("metrics server")
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = hs.Shutdown(sctx)
		}()
		log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics, /healthz, /readyz")
	}

	runCtx, drain := context.WithCancel(ctx)
	defer drain()
	abort := make(chan os.Signal, 1)
	stopSignals := make(chan struct{})
	defer close(stopSignals)
	go watchSignals(runCtx, stopSignals, drain, sigs, abort, svc, log)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx, nc) }()
	select {
	case err = <-done:
	case sig := <-abort:
		log.Error().Str("signal", sig.String()).Msg("second signal while draining: exiting without finishing the drain")
		return fmt.Errorf("%w (%s)", errAborted, sig)
	}
	if err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// watchSignals handles the signals on sigs until stop is closed: SIGHUP
// reloads the checkpoint while serving; the first SIGINT/SIGTERM starts the
// drain (drain); one during the drain (the first, if ctx ended otherwise)
// goes to abort.
func watchSignals(ctx context.Context, stop <-chan struct{}, drain context.CancelFunc, sigs <-chan os.Signal, abort chan<- os.Signal, svc *service.Service, log zerolog.Logger) {
	for {
		var sig os.Signal
		select {
		case <-stop:
			return
		case s, ok := <-sigs:
			if !ok {
				return
			}
			sig = s
		}
		switch {
		case sig == syscall.SIGHUP && ctx.Err() == nil:
			log.Info().Msg("SIGHUP: reloading the checkpoint")
			_ = svc.Reload() // logs and counts its own failure
		case sig == syscall.SIGHUP:
			log.Info().Msg("SIGHUP while draining: ignored")
		case ctx.Err() == nil:
			log.Info().Str("signal", sig.String()).Msg("draining (a second signal exits at once)")
			drain()
		default:
			select {
			case abort <- sig:
			default:
			}
			return
		}
	}
}
