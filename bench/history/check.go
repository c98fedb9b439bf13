package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// Want is one decision the undisturbed rollout takes: the window ending
// at End and its outcome (a spike at Bin, or no spike up to Bin).
type Want struct {
	End, Bin int64
	Spike    bool
}

// Reference is the undisturbed history of a stretch: every decision of
// every cell, in the order the cells take them.
type Reference struct {
	// Last is the stretch's last bin: cells decide windows ending before
	// it (rollout.Run); windows ending at or after it are not checked.
	Last  int64
	cells map[int32][]Want
	index map[key]int
}

type key struct {
	cell int32
	end  int64
}

// NewReference returns the reference of a rollout run with
// rollout.Options.KeepChoices: each window's decision is Step of its
// chosen class, as the daemon's.
func NewReference(res *rollout.Result) (*Reference, error) {
	r := &Reference{Last: int64(res.To - 1), cells: make(map[int32][]Want, len(res.Trains)), index: map[key]int{}}
	for _, tr := range res.Trains {
		if tr.Windows > 0 && len(tr.Choices) != tr.Windows {
			return nil, errors.New("history: the rollout kept no choices (run it with rollout.Options.KeepChoices)")
		}
		id := int32(tr.ClusterID)
		ws := make([]Want, len(tr.Choices))
		for i, c := range tr.Choices {
			next, spike := rollout.Step(c.End, c.Class)
			ws[i] = Want{End: int64(c.End), Bin: int64(next), Spike: spike}
			r.index[key{id, int64(c.End)}] = i
		}
		r.cells[id] = ws
	}
	return r, nil
}

// Decisions returns the number of decisions of the reference.
func (r *Reference) Decisions() int {
	return len(r.index)
}

// Cell returns a cell's reference decisions (nil for a cell not in it).
func (r *Reference) Cell(id int32) []Want { return r.cells[id] }

// Report is the verdict on a history.
type Report struct {
	// Expected is the reference's decisions, Received the decisions the
	// device took, Matched the reference decisions received, first copy
	// equal to the reference.
	Expected, Received, Matched int64
	// Lost counts reference decisions never received, except those in a
	// declared outage, counted as LostInOutage; Duplicated the copies
	// after the first of a decision (same cell and window end); Wrong the
	// received decisions that differ from the reference or decide a window
	// it never decides (a chain that left the reference); Late the
	// decisions of a stream older than the device's (sent before its reset,
	// taken after it) and those taken after a later window of their cell.
	Lost, Duplicated, Wrong, Late int64
	// LostInOutage counts reference decisions never received whose window
	// ends in a declared full outage's span (CheckOutages).
	LostInOutage int64
	// Skipped counts KindSkipped decisions (the daemon's overload account:
	// the cell stepped as "no spike"); they count as wrong where the
	// reference placed a spike.
	Skipped int64
	// Foreign counts decisions of cells outside the reference; Beyond
	// those of windows ending at or after its last bin (not checked).
	Foreign, Beyond int64
	// Diverged lists the cells whose chain left the reference (a wrong
	// decision), ascending.
	Diverged []int32
	// Examples describes the first problems (at most MaxExamples).
	Examples []string
}

// MaxExamples bounds Report.Examples.
const MaxExamples = 12

// OK reports whether the history is exactly once and equal to the
// reference, outside declared outages (LostInOutage is not a failure:
// docs/protocol.md, "Outages").
func (r *Report) OK() bool { return r.Lost+r.Duplicated+r.Wrong+r.Late == 0 }

// String is the report in one line.
func (r *Report) String() string {
	v := "PASS"
	if !r.OK() {
		v = "FAIL"
	}
	out := ""
	if r.LostInOutage > 0 {
		out = fmt.Sprintf(" (and %d in a declared outage)", r.LostInOutage)
	}
	return fmt.Sprintf("%s: %d of %d decisions matched; lost %d%s, duplicated %d, wrong %d, late %d (skipped %d, diverged cells %d)",
		v, r.Matched, r.Expected, r.Lost, out, r.Duplicated, r.Wrong, r.Late, r.Skipped, len(r.Diverged))
}

func (r *Report) note(format string, args ...any) {
	if len(r.Examples) < MaxExamples {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// Span is a range of window ends [From, To], both included.
type Span struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Check checks the decisions a device took, in arrival order, against the
// reference. epoch is the low 16 bits of the device's stream epoch (the
// stream its reset started); decisions of an earlier epoch are late, those
// of a later one (a stream the daemon restarted) are checked like the
// others.
func Check(ref *Reference, got []stream.Decision, epoch uint16) *Report {
	return CheckOutages(ref, got, epoch, nil)
}

// CheckOutages is Check with declared full outages: a reference decision
// never received whose window end lies in one of outages counts as
// LostInOutage instead of Lost. The caller chooses the spans (the
// nemesis: the window ends the device published during an outage and
// within a margin around it).
func CheckOutages(ref *Reference, got []stream.Decision, epoch uint16, outages []Span) *Report {
	rep := &Report{Expected: int64(ref.Decisions())}
	seen := make(map[key]bool, len(ref.index))
	newest := map[int32]int64{}
	diverged := map[int32]bool{}
	for i := range got {
		d := &got[i]
		ws, ok := ref.cells[d.Cell]
		if !ok {
			rep.Foreign++
			continue
		}
		rep.Received++
		if int16(d.Epoch-epoch) < 0 {
			rep.Late++
			rep.note("cell %d window %d: epoch %d, before the device's reset (epoch %d)", d.Cell, d.End, d.Epoch, epoch)
			continue
		}
		if d.End >= ref.Last {
			rep.Beyond++
			continue
		}
		if d.Kind == stream.KindSkipped {
			rep.Skipped++
		}
		k := key{d.Cell, d.End}
		if n, ok := newest[d.Cell]; ok && d.End < n {
			rep.Late++
			rep.note("cell %d window %d: taken after window %d", d.Cell, d.End, n)
		}
		newest[d.Cell] = max(newest[d.Cell], d.End)
		if seen[k] {
			rep.Duplicated++
			rep.note("cell %d window %d: duplicated", d.Cell, d.End)
			continue
		}
		seen[k] = true
		i, ok := ref.index[k]
		if !ok {
			rep.Wrong++
			if !diverged[d.Cell] {
				rep.note("cell %d window %d: the reference decides no such window", d.Cell, d.End)
			}
			diverged[d.Cell] = true
			continue
		}
		if w := ws[i]; w.Spike != (d.Kind == stream.KindSpike) || w.Bin != d.Bin {
			rep.Wrong++
			if !diverged[d.Cell] {
				filled := ""
				if d.Flags&stream.FlagFilled != 0 {
					filled = " (its window filled across a gap)"
				}
				rep.note("cell %d window %d: %s%s, the reference %s", d.Cell, d.End, describe(d.Kind == stream.KindSpike, d.Bin), filled, describe(w.Spike, w.Bin))
			}
			diverged[d.Cell] = true
			continue
		}
		rep.Matched++
	}
	var lost []string
	for id, ws := range ref.cells {
		for _, w := range ws {
			if !seen[key{id, w.End}] {
				if inSpans(w.End, outages) {
					rep.LostInOutage++
					continue
				}
				rep.Lost++
				if len(lost) < MaxExamples {
					lost = append(lost, fmt.Sprintf("cell %d window %d: lost", id, w.End))
				}
			}
		}
	}
	slices.Sort(lost)
	for _, l := range lost {
		rep.note("%s", l)
	}
	for id := range diverged {
		rep.Diverged = append(rep.Diverged, id)
	}
	slices.Sort(rep.Diverged)
	return rep
}

func inSpans(end int64, spans []Span) bool {
	return slices.ContainsFunc(spans, func(s Span) bool { return s.From <= end && end <= s.To })
}

func describe(spike bool, bin int64) string {
	if spike {
		return fmt.Sprintf("spike at %d", bin)
	}
	return fmt.Sprintf("no spike to %d", bin)
}

// StateReport compares the replicas' final states.
type StateReport struct {
	// Replicas is the number of states compared; Distinct the number of
	// different ones (1 when all are byte-identical).
	Replicas, Distinct int
	// Fields lists the top-level fields (daemon.Snapshot's JSON names) that
	// differ between the first state and any other, ascending.
	Fields []string
}

// OK reports whether every replica's state is byte-identical.
func (s *StateReport) OK() bool { return s.Distinct <= 1 }

// String is the report in one line.
func (s *StateReport) String() string {
	if s.OK() {
		return fmt.Sprintf("%d replica states byte-identical", s.Replicas)
	}
	return fmt.Sprintf("%d replica states, %d distinct (fields %s)", s.Replicas, s.Distinct, strings.Join(s.Fields, ", "))
}

// CompareStates compares replicas' states (daemon.Snapshot as JSON) byte
// for byte and names the top-level fields that differ.
func CompareStates(states [][]byte) (*StateReport, error) {
	rep := &StateReport{Replicas: len(states)}
	var distinct [][]byte
	fields := map[string]bool{}
	var first map[string]jsonRaw
	for i, s := range states {
		if !slices.ContainsFunc(distinct, func(d []byte) bool { return string(d) == string(s) }) {
			distinct = append(distinct, s)
		}
		m, err := topLevel(s)
		if err != nil {
			return nil, fmt.Errorf("history: replica state %d: %w", i, err)
		}
		if i == 0 {
			first = m
			continue
		}
		for k, v := range m {
			if string(first[k]) != string(v) {
				fields[k] = true
			}
		}
		for k := range first {
			if _, ok := m[k]; !ok {
				fields[k] = true
			}
		}
	}
	rep.Distinct = len(distinct)
	for k := range fields {
		rep.Fields = append(rep.Fields, k)
	}
	slices.Sort(rep.Fields)
	return rep, nil
}

// LostAtLeast returns the fewest decisions a gap of bins between the window
// a cell waited for and the next one it got can hide: each decision moves
// a cell at most rgc.Horizon bins on. Without a reference the exact count
// is unknown; this bound is what a device can tell alone.
func LostAtLeast(gap int64) int64 {
	if gap <= 0 {
		return 0
	}
	return (gap + rgc.Horizon - 1) / rgc.Horizon
}

type jsonRaw = json.RawMessage

func topLevel(b []byte) (map[string]jsonRaw, error) {
	var m map[string]jsonRaw
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return m, nil
}

// Duplicates counts the decisions taken more than once (the same cell and
// window end and stream epoch), the copies after the first; it needs no
// reference.
func Duplicates(got []stream.Decision) int64 {
	type ekey struct {
		key
		epoch uint16
	}
	seen := make(map[ekey]bool, len(got))
	var n int64
	for i := range got {
		k := ekey{key{got[i].Cell, got[i].End}, got[i].Epoch}
		if seen[k] {
			n++
		}
		seen[k] = true
	}
	return n
}
