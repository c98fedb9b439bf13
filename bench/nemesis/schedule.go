package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults. A holder or standby is a predictord of the group (the
// holder publishes); a node is a NATS server of the cluster.
const (
	// KillHolder and KillStandby kill -9 an instance and restart it after
	// Fault.For.
	KillHolder  Kind = "kill-holder"
	KillStandby Kind = "kill-standby"
	// PauseHolder and PauseStandby SIGSTOP an instance for Fault.For,
	// several lease TTLs, then SIGCONT it.
	PauseHolder  Kind = "pause-holder"
	PauseStandby Kind = "pause-standby"
	// KillNode kill -9s a random node, KillMetaLeader the JetStream meta
	// leader, KillLeaseLeader the leader of the lease bucket's stream;
	// each is restarted after Fault.For with its store.
	KillNode        Kind = "kill-node"
	KillMetaLeader  Kind = "kill-meta-leader"
	KillLeaseLeader Kind = "kill-lease-leader"
	// CutHolder and CutStandby partition an instance from every node (its
	// proxies swallow all data; the process keeps running) for Fault.For.
	CutHolder  Kind = "cut-holder"
	CutStandby Kind = "cut-standby"
	// SlowLink delays everything between an instance and the nodes by
	// Fault.Latency for Fault.For.
	SlowLink Kind = "slow-link"
	// Burst publishes Fault.Count malformed messages on the device's frame
	// and control subjects at once.
	Burst Kind = "burst"
	// Outage is a declared full outage: every node is killed with -9 and
	// restarted with its store after Fault.For (docs/protocol.md,
	// "Outages"). Decisions lost to it are counted apart
	// (history.Report.LostInOutage).
	Outage Kind = "outage"
	// PartitionNode cuts a random node from the other two (the routes
	// between them swallow everything; its clients stay connected to it)
	// for Fault.For.
	PartitionNode Kind = "partition-node"
	// KillRecordLeader kill -9s the leader of the flight recorder's
	// stream (Config.Record) and restarts it after Fault.For with its
	// store. Only a run with the recorder on draws it (RecordKinds).
	KillRecordLeader Kind = "kill-record-leader"
)

// Kinds lists every kind of fault.
var Kinds = []Kind{KillHolder, KillStandby, PauseHolder, PauseStandby, KillNode, KillMetaLeader, KillLeaseLeader,
	CutHolder, CutStandby, SlowLink, Burst, Outage, PartitionNode}

// RecordKinds lists the faults that need the flight recorder on; they are
// apart from Kinds so that a seed plans the same faults with it off.
var RecordKinds = []Kind{KillRecordLeader}

// nodeKills lists the kinds that kill one NATS node while the others run.
var nodeKills = []Kind{KillNode, KillMetaLeader, KillLeaseLeader, KillRecordLeader}

// KillsNode reports whether the fault kills one NATS node while the others
// run (an outage, killing them all, does not count).
func (k Kind) KillsNode() bool { return slices.Contains(nodeKills, k) }

// ParseKinds parses a comma-separated list of kinds ("all": every kind;
// "none": no fault, an undisturbed run). With record (the flight recorder
// on) "all" adds RecordKinds and they may be named; without, naming one is
// an error.
func ParseKinds(s string, record bool) ([]Kind, error) {
	known := slices.Clone(Kinds)
	if record {
		known = append(known, RecordKinds...)
	}
	switch s {
	case "all", "":
		return known, nil
	case "none":
		return []Kind{}, nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if !record && slices.Contains(RecordKinds, k) {
			return nil, fmt.Errorf("nemesis: fault %q needs the flight recorder on", k)
		}
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("nemesis: unknown fault %q (known: %v)", k, known)
		}
		out = append(out, k)
	}
	return out, nil
}

// Fault is one planned fault and, once applied, what it hit.
type Fault struct {
	Kind Kind `json:"kind"`
	// Gap is the wait before it, after the previous fault's recovery (or
	// the replay's start).
	Gap time.Duration `json:"gap_ns"`
	// For is how long the fault lasts (down, paused, cut or slow).
	For time.Duration `json:"for_ns"`
	// Latency is a slow link's delay; Count a burst's messages.
	Latency time.Duration `json:"latency_ns,omitempty"`
	Count   int           `json:"count,omitempty"`
	// Pick chooses among equal targets (a random node or standby).
	Pick int `json:"pick"`
	// Target names what it hit, At when it began and Until when it ended
	// (since the replay's start); Skipped says why it was not applied (""
	// when it was).
	Target string        `json:"target,omitempty"`
	At     time.Duration `json:"at_ns"`
	Until  time.Duration `json:"until_ns,omitempty"`
	// Recovered is how long after Until the topology recovered (every
	// node healthy and routed, every instance synced, one holder); 0 when
	// it did not before the replay ended or within 20 s.
	Recovered time.Duration `json:"recovered_ns,omitempty"`
	Skipped   string        `json:"skipped,omitempty"`
}

// String describes the fault in a few words.
func (f Fault) String() string {
	s := fmt.Sprintf("%s %s for %v", f.Kind, f.Target, f.For.Round(time.Millisecond))
	if f.Kind == SlowLink {
		s += fmt.Sprintf(" (+%v)", f.Latency)
	}
	if f.Kind == Burst {
		s = fmt.Sprintf("burst of %d", f.Count)
	}
	if f.Skipped != "" {
		s += " (not applied: " + f.Skipped + ")"
	} else {
		s += fmt.Sprintf(" at %.1fs", f.At.Seconds())
	}
	if f.Recovered > 0 {
		s += fmt.Sprintf(", recovered %.1fs after", f.Recovered.Seconds())
	}
	return s
}

// Plan returns the faults of a schedule: a seeded random sequence of kinds,
// durations and gaps filling length, one fault at a time (each after the
// previous one recovered). ttl is the lease's TTL: pauses last 3 to 30 of
// them. When kinds hold a kind killing one NATS node and the draw holds
// none, its first fault becomes one (a kind among those, drawn from the
// seed; shortened to fit a schedule under 8 s): every schedule of at least
// 4 s plans a node kill, so any number of schedules meets the issue's
// share (at least 20 of 100). The same seed, length, ttl and kinds give
// the same plan.
func Plan(seed uint64, length, ttl time.Duration, kinds []Kind) []Fault {
	if len(kinds) == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	out := fill(r, nil, length, ttl, kinds)
	var kills []Kind
	for _, k := range kinds {
		if k.KillsNode() {
			kills = append(kills, k)
		}
	}
	if len(kills) == 0 || slices.ContainsFunc(out, func(f Fault) bool { return f.Kind.KillsNode() }) {
		return out
	}
	// A second stream of the same seed: the draw above stays as it was.
	r = rand.New(rand.NewPCG(seed, 0x6b696c6c))
	first := draw(r, kills[r.IntN(len(kills))], ttl)
	if first.Gap+first.For > length { // a short schedule: the kill ends with it
		first.For = length - first.Gap
	}
	if first.For < time.Second {
		return out
	}
	return fill(r, []Fault{first}, length, ttl, kinds)
}

// fill appends faults drawn from r to out until they would pass length.
func fill(r *rand.Rand, out []Fault, length, ttl time.Duration, kinds []Kind) []Fault {
	used := time.Duration(0)
	for _, f := range out {
		used += f.Gap + f.For
	}
	for {
		f := draw(r, kinds[r.IntN(len(kinds))], ttl)
		used += f.Gap + f.For
		if used > length {
			return out
		}
		out = append(out, f)
	}
}

// draw returns a fault of kind with its gap, duration and parameters drawn
// from r.
func draw(r *rand.Rand, kind Kind, ttl time.Duration) Fault {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	f := Fault{Kind: kind, Gap: between(time.Second, 3*time.Second), Pick: r.IntN(1 << 16)}
	switch f.Kind {
	case KillHolder, KillStandby:
		f.For = between(200*time.Millisecond, 3*time.Second)
	case PauseHolder, PauseStandby:
		f.For = between(3*ttl, 30*ttl)
	case KillNode, KillMetaLeader, KillLeaseLeader, KillRecordLeader:
		f.For = between(time.Second, 5*time.Second)
	case Outage:
		f.For = between(time.Second, 3*time.Second)
	case CutHolder, CutStandby, PartitionNode:
		f.For = between(500*time.Millisecond, 4*time.Second)
	case SlowLink:
		f.For = between(time.Second, 4*time.Second)
		f.Latency = between(5*time.Millisecond, 100*time.Millisecond)
	case Burst:
		f.Count = 100 + r.IntN(1900)
	}
	return f
}
