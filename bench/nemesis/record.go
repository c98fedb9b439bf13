package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/serve/daemon"
	"rgcpred/serve/recorder"
)

// Recorder turns the flight recorder on in a run: every instance records
// into Stream (predictord --record; R3 on the 3-node cluster), and each
// schedule ends with the recording's audit (recorder.Audit, what `replay
// --from-stream` runs).
type Recorder struct {
	// Stream is the recording's JetStream stream.
	Stream string
	// Predictor is the checkpoint the instances serve, re-run by the
	// audit in the recorded session's arithmetic; Known its cells.
	Predictor rgc.Predictor
	Known     []int
}

// Recording is the audit of one schedule's recording.
type Recording struct {
	// Audit is the audit's report (nil when it could not run).
	Audit *recorder.Report `json:"audit,omitempty"`
	// Sent is the number of frames the device sent after the history.
	Sent int64 `json:"sent"`
	// Err says why the audit could not run ("" when it ran).
	Err string `json:"error,omitempty"`
}

// OK reports whether the audit ran and the recorded decisions equal the
// replayed ones.
func (r *Recording) OK() bool { return r.Err == "" && r.Audit != nil && r.Audit.OK() }

// String summarises the audit in a few lines.
func (r *Recording) String() string {
	if r.Err != "" {
		return "recording: audit did not run: " + r.Err
	}
	return fmt.Sprintf("recording: %d frames replayed (the device sent %d after the history)\n%s", r.Audit.Frames, r.Sent, r.Audit)
}

// auditTimeout bounds how long audit waits for the recording's stream to
// answer: a node killed at the replay's end restarts after it, and the
// stream's leader is elected again.
const auditTimeout = 30 * time.Second

// audit re-runs the recording of the schedule that just ended, once every
// node is healthy; a read the stream does not answer yet (no leader, no
// responders) is tried again every 500 ms up to auditTimeout.
func (t *topology) audit(ctx context.Context) *Recording {
	rc := t.cfg.Record
	out := &Recording{Sent: int64(t.cfg.To - t.cfg.From - rgc.WindowBins)}
	deadline := time.Now().Add(auditTimeout)
	if err := t.cluster.WaitHealthy(ctx, auditTimeout); err != nil {
		out.Err = err.Error()
		return out
	}
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		rep, err := recorder.Audit(actx, recorder.StreamSource(t.js, rc.Stream, Device), recorder.AuditConfig{
			Predictor: rc.Predictor,
			Core:      daemon.Config{Known: rc.Known},
			Precision: func(p string) error { return forcePrecision(rc.Predictor, p) },
		})
		cancel()
		if err == nil {
			out.Audit = rep
			return out
		}
		if errors.Is(err, recorder.ErrEmpty) || time.Now().After(deadline) || ctx.Err() != nil {
			out.Err = err.Error()
			return out
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// forcePrecision sets p to the recorded arithmetic when p is the CPU
// engine; another predictor must already compute in it.
func forcePrecision(p rgc.Predictor, prec string) error {
	if e, ok := p.(*engine.Engine); ok {
		return e.Force(engine.Precision(prec))
	}
	if got := engine.PrecisionOf(p); string(got) != prec {
		return fmt.Errorf("the predictor computes in %s", got)
	}
	return nil
}

// streamLeader returns the node leading the JetStream stream name.
func (t *topology) streamLeader(ctx context.Context, name string) (*Node, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := t.js.Stream(sctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil || t.cluster.Node(info.Cluster.Leader) == nil {
		return nil, fmt.Errorf("stream %s: no leader", name)
	}
	return t.cluster.Node(info.Cluster.Leader), nil
}
