// Package recorder is predictord's flight recorder on NATS JetStream: a
// stream that captures a device's subjects (frames and control messages
// in, decisions and stream events out) within size and age limits, a reader
// that iterates a recorded session in order, and an audit that re-runs the
// session's frames through the decision core and checks that the decisions
// it takes equal the recorded ones (same model, same spikes).
//
// The server stores the messages as they cross it, so recording costs the
// daemon nothing per frame and records what the device actually sent and
// received (with hot standby, the holder's decisions only).
package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/jsreplicas"
	"rgcpred/serve/jsstart"
	"rgcpred/stream"
)

// Config configures a recording stream.
type Config struct {
	// Stream names the JetStream stream.
	Stream string
	// Devices are the devices whose subjects are recorded.
	Devices []string
	// MaxBytes bounds the stream's size (0: unlimited); the oldest messages
	// go first.
	MaxBytes int64
	// MaxAge bounds the age of the messages kept (0: unlimited).
	MaxAge time.Duration
	// Memory keeps the stream in memory instead of files.
	Memory bool
	// FillEvery and FillSettle are a recording daemon's Filler settings
	// (0: FillEvery, FillSettle).
	FillEvery, FillSettle time.Duration
}

// SessionSubject is the subject of a device's session header, a JSON
// Session describing how its decisions are taken.
func SessionSubject(device string) string { return "rgcrec." + device + ".session" }

// Subjects returns the subjects recorded for a device: frames, control,
// decisions, stream events, the session header and the messages stored
// again (FillSubject).
func Subjects(device string) []string {
	return []string{stream.StimSubject(device), stream.ControlSubject(device), stream.SpikesSubject(device),
		stream.EventsSubject(device), SessionSubject(device), FillSubject(device)}
}

// Ensure creates the recording stream of cfg, or updates its subjects
// and limits, and returns it, in one try (Open, without a wait).
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, error) {
	st, _, err := Open(ctx, js, cfg, 0, nil)
	return st, err
}

// Open creates the recording stream of cfg, or updates its subjects and
// limits, and returns it with its replicas against those wanted: as many
// as the cluster places, up to jsreplicas.Max on a cluster (1 on a
// single server), never fewer than the stream has, so a restart while a
// node is down keeps them. While JetStream cannot answer or place them
// yet, it tries again for up to wait, telling warn (jsstart.Open).
func Open(ctx context.Context, js jetstream.JetStream, cfg Config, wait time.Duration, warn func(error)) (jetstream.Stream, jsreplicas.Placement, error) {
	sc, err := streamConfig(cfg)
	if err != nil {
		return nil, jsreplicas.Placement{}, err
	}
	var s jetstream.Stream
	p, err := jsstart.Open(ctx, js, cfg.Stream, 0, wait, warn, func(ctx context.Context, replicas int) (err error) {
		sc.Replicas = replicas
		s, err = js.CreateOrUpdateStream(ctx, sc)
		return err
	})
	if err != nil {
		return nil, p, fmt.Errorf("recorder: stream %s: %w", cfg.Stream, err)
	}
	return s, p, nil
}

// streamConfig returns the stream configuration of cfg, without its
// replicas.
func streamConfig(cfg Config) (jetstream.StreamConfig, error) {
	if cfg.Stream == "" || len(cfg.Devices) == 0 {
		return jetstream.StreamConfig{}, errors.New("recorder: a stream name and at least one device are needed")
	}
	if cfg.MaxBytes < 0 || cfg.MaxAge < 0 {
		return jetstream.StreamConfig{}, fmt.Errorf("recorder: stream %s: negative limit", cfg.Stream)
	}
	var subjects []string
	for _, d := range cfg.Devices {
		if err := stream.CheckDevice(d); err != nil {
			return jetstream.StreamConfig{}, fmt.Errorf("recorder: stream %s: %w", cfg.Stream, err)
		}
		subjects = append(subjects, Subjects(d)...)
	}
	sc := jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "predictord flight recorder",
		Subjects:    subjects,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxBytes:    cfg.MaxBytes,
		MaxAge:      cfg.MaxAge,
		Storage:     jetstream.FileStorage,
	}
	if cfg.MaxBytes == 0 {
		sc.MaxBytes = -1
	}
	if cfg.Memory {
		sc.Storage = jetstream.MemoryStorage
	}
	return sc, nil
}

// Session describes how a daemon takes a device's decisions, so that an
// audit re-runs them the same way.
type Session struct {
	// Model describes the checkpoint (its name or path and provenance).
	Model string `json:"model"`
	// Cells are the cells served, All the whole cell list before sharding.
	Cells []int `json:"cells"`
	All   []int `json:"all,omitempty"`
	// Stagger, PublishSilence: daemon.Config's.
	Stagger        bool `json:"stagger"`
	PublishSilence bool `json:"publish_silence"`
	// MaxLag is the overload threshold in bins (0: no skipping).
	MaxLag int64 `json:"max_lag"`
	// Policy is the spike policy (rollout.Policy.String(), which
	// rollout.ParsePolicy reads back; "" for the median).
	Policy string `json:"policy,omitempty"`
	// Precision is the arithmetic of the model's convolutions and linear
	// layers when the session began (engine.ArithmeticOf: "fp32", "bf16"
	// or "int8" on the CPU engine, "cuda fp32" or "cuda tf32" on the GPU
	// engine, fp32 for a predictor that names none; "" when unknown).
	Precision string `json:"precision,omitempty"`
	// BinPeriod is daemon.Config.BinPeriod (0: the numbering rules use
	// no wall time); the audit then replays each frames message at the
	// time the server stored it.
	BinPeriod time.Duration `json:"bin_period_ns,omitempty"`
	// Authenticated is set when the daemon refused device messages
	// without a valid authenticator (message keys): the audit needs the
	// device's keys to refuse the same ones.
	Authenticated bool `json:"authenticated,omitempty"`
	// Started is when the daemon began recording.
	Started time.Time `json:"started"`
}

// WriteSession stores a device's session header in the recording (through
// a JetStream publish, acknowledged by the stream).
func WriteSession(ctx context.Context, js jetstream.JetStream, device string, s Session) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("recorder: session of %s: %w", device, err)
	}
	if _, err := js.Publish(ctx, SessionSubject(device), b); err != nil {
		return fmt.Errorf("recorder: session of %s: %w", device, err)
	}
	return nil
}
