package nemesis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/serve/daemon"
	"rgcpred/serve/recorder"
	"rgcpred/stream"
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
	// Sent is the number of frames the device sent, history included;
	// Recorded the frames the recording holds of them, and Holes the
	// spans of them it lacks.
	Sent     int64  `json:"sent"`
	Recorded int64  `json:"recorded"`
	Holes    []Hole `json:"holes,omitempty"`
	// Unhealthy says which nodes still answered /healthz with an error
	// when the audit ran, past auditHealthWait ("" when every node was
	// healthy).
	Unhealthy string `json:"unhealthy,omitempty"`
	// Err says why the audit could not run ("" when it ran).
	Err string `json:"error,omitempty"`
}

// OK reports whether the audit ran, the recording holds every frame the
// device sent (the audit cannot see a span lost at the recording's end:
// nothing follows it) and the recorded decisions equal the replayed ones.
func (r *Recording) OK() bool {
	return r.Err == "" && r.Audit != nil && r.Audit.OK() && len(r.Holes) == 0
}

// String summarises the audit in a few lines.
func (r *Recording) String() string {
	if r.Err != "" {
		return "recording: audit did not run: " + r.Err
	}
	var b strings.Builder
	if r.Unhealthy != "" {
		fmt.Fprintf(&b, "recording: audited with a node unhealthy after %v (%s)\n", auditHealthWait, r.Unhealthy)
	}
	fmt.Fprintf(&b, "recording: %d of the %d frames the device sent, %d holes", r.Recorded, r.Sent, len(r.Holes))
	for i, h := range r.Holes {
		if i == 8 {
			fmt.Fprintf(&b, ", ...")
			break
		}
		fmt.Fprintf(&b, "; %s", h)
	}
	fmt.Fprintf(&b, "\n%s", r.Audit)
	return b.String()
}

// Hole is a span of frames the device sent that the recording lacks: From
// to To (sequence numbers, inclusive), At the time since the replay's
// start the device sent From.
type Hole struct {
	From, To int64
	At       time.Duration
}

// String describes the hole in a few words.
func (h Hole) String() string {
	return fmt.Sprintf("%d frames from %d (%.1fs)", h.To-h.From+1, h.From, h.At.Seconds())
}

// watchFrames returns src, noting the device's frames (first to last,
// inclusive) each read of it passes, and a function that returns, for
// the last read, how many it passed and the spans it lacked; start is
// the frame the device sent at the replay's start, dating each hole at
// the device's real-time pace. The audit reads src itself, so the holes
// cost no read of their own.
func watchFrames(src recorder.Source, first, last, start int64) (recorder.Source, func() (int64, []Hole)) {
	seen := make([]bool, last-first+1)
	watched := func(ctx context.Context, fn func(recorder.Msg) error) error {
		clear(seen)
		return src(ctx, func(m recorder.Msg) error {
			if m.Kind == recorder.KindFrames {
				if f, n, err := stream.PeekFrames(m.Data); err == nil { // a malformed one (a burst) is not the device's
					for s := max(f, first); s < f+int64(n) && s <= last; s++ {
						seen[s-first] = true
					}
				}
			}
			return fn(m)
		})
	}
	return watched, func() (int64, []Hole) {
		var got int64
		var out []Hole
		for i, ok := range seen {
			s := first + int64(i)
			switch {
			case ok:
				got++
			case len(out) > 0 && out[len(out)-1].To == s-1:
				out[len(out)-1].To = s
			default:
				at := time.Duration(float64(max(s-start, 0)) / rgc.BinRateHz * float64(time.Second))
				out = append(out, Hole{From: s, To: s, At: at})
			}
		}
		return got, out
	}
}

// auditTimeout bounds how long audit waits for the recording's stream to
// answer and be filled, once the cluster is healthy (or past
// auditHealthWait): a node killed at the replay's end restarts after it,
// the stream's leader is elected again, and the holder's filler
// (recorder.Filler, a round a second) stores what the stream lacks.
const auditTimeout = 30 * time.Second

// auditHealthWait bounds how long audit waits for every node to answer
// /healthz 200. A node whose copy of a stream fell behind (partitioned
// while it led the stream, or restarted) answers 503 ("stream ... is not
// current: group node unhealthy") until it caught up, and nats-server may
// catch it up only from the leader's next snapshot of the stream's log,
// taken every 2 to 3 minutes (seed 7001: the recorder stream on n2 for
// 51 s and more after its partition healed, its catch-up refused again
// every 4 s). The stream answers from its leader and the other replica
// meanwhile, so past this wait the audit runs anyway once the stream
// names a leader, and the recording says which node was unhealthy.
const auditHealthWait = 30 * time.Second

// audit re-runs the recording of the schedule that just ended, once every
// node is healthy (or past auditHealthWait, with the stream's leader
// known); a read the stream does not answer yet (no leader, no
// responders), or that found no stream start (a read through a replica
// behind the leader), is tried again every 500 ms, and a recording that does not
// pass (holes, decisions missing) every second: its holder may still be
// filling what the stream did not store, up to auditTimeout.
func (t *topology) audit(ctx context.Context) *Recording {
	first, last := int64(t.cfg.From), int64(t.cfg.To-1)
	out := &Recording{Sent: last - first + 1}
	if err := t.cluster.WaitHealthy(ctx, auditHealthWait); err != nil {
		if _, lerr := t.streamLeader(ctx, t.cfg.Record.Stream); lerr != nil {
			out.Err = fmt.Sprintf("%v; %v", err, lerr)
			return out
		}
		out.Unhealthy = err.Error()
		fmt.Fprintf(t.cfg.Log, "  auditing with a node unhealthy: %v\n", err)
	}
	deadline := time.Now().Add(auditTimeout)
	for {
		err := t.auditOnce(ctx, out, first, last)
		if err == nil && (out.OK() || time.Now().After(deadline) || ctx.Err() != nil) {
			return out
		}
		if err == nil {
			sleep(ctx, time.Second)
			continue
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			out.Err = err.Error()
			return out
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// auditOnce audits the recording and finds its holes into out.
func (t *topology) auditOnce(ctx context.Context, out *Recording, first, last int64) error {
	rc := t.cfg.Record
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	src, holes := watchFrames(recorder.StreamSource(t.js, rc.Stream, Device), first, last, first+rgc.WindowBins)
	acfg := recorder.AuditConfig{
		Predictor: rc.Predictor,
		Core:      daemon.Config{Known: rc.Known},
		Precision: func(p string) error { return forcePrecision(rc.Predictor, p) },
	}
	if k := t.cfg.Keys; k != nil {
		acfg.UpKey, acfg.GroupKey = k.device().Up, k.Parsed.Groups[Group]
	}
	rep, err := recorder.Audit(actx, src, acfg)
	if err != nil {
		return err
	}
	out.Recorded, out.Holes = holes()
	out.Audit = rep
	return nil
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

// streamLeader returns the node leading the JetStream stream name; a
// stream that does not answer or has no leader yet (electing after a
// fault) is asked again every 250 ms for up to 10 s.
func (t *topology) streamLeader(ctx context.Context, name string) (*Node, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := t.leaderOnce(ctx, name)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return n, err
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

func (t *topology) leaderOnce(ctx context.Context, name string) (*Node, error) {
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
