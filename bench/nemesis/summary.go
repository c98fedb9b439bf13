package nemesis

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Summary totals the verdicts of several schedules.
type Summary struct {
	// Schedules run; Passed of them; NodeKills those that killed one NATS
	// node while the others ran (a fault applied; Plan puts one in every
	// schedule drawing from such kinds).
	Schedules, Passed, NodeKills int
	// Faults counts the faults applied by kind.
	Faults map[Kind]int
	// Checked, Lost, LostInOutage, Duplicated, Wrong and Late total the
	// history reports; Unsettled counts schedules whose instances did not
	// settle after the replay, StatesDiffer those whose settled replicas'
	// states differ; Errors schedules that stopped with an error.
	Checked, Matched, Lost, LostInOutage, Duplicated, Wrong, Late int64
	Unsettled, StatesDiffer, Errors                               int
	// Audited counts the schedules whose recording was audited (the
	// flight recorder on), AuditPassed those whose audit passed,
	// AuditIncomplete those whose recording kept holes while every
	// decision judged matched; Filled counts the messages the holders
	// stored again that the audits read, FilledAnswers those holding
	// frames a resend answer brought.
	Audited, AuditPassed, AuditIncomplete int
	Filled, FilledAnswers                 uint64
	// Failed lists the seeds of the failed schedules.
	Failed []uint64
}

// Summarise totals verdicts.
func Summarise(vs []*Verdict) *Summary {
	s := &Summary{Faults: map[Kind]int{}}
	for _, v := range vs {
		s.Schedules++
		if v.OK() {
			s.Passed++
		} else {
			s.Failed = append(s.Failed, v.Seed)
		}
		node := false
		for _, f := range v.Faults {
			if f.Skipped == "" {
				s.Faults[f.Kind]++
				node = node || f.Kind.KillsNode()
			}
		}
		if node {
			s.NodeKills++
		}
		if v.Err != "" {
			s.Errors++
		}
		if h := v.History; h != nil {
			s.Checked += h.Expected
			s.Matched += h.Matched
			s.Lost += h.Lost
			s.LostInOutage += h.LostInOutage
			s.Duplicated += h.Duplicated
			s.Wrong += h.Wrong
			s.Late += h.Late
		}
		if v.Recording != nil {
			s.Audited++
			if v.Recording.OK() {
				s.AuditPassed++
			}
			if a := v.Recording.Audit; a != nil {
				s.Filled += a.Filled
				s.FilledAnswers += a.FilledAnswers
				if a.Judged() && !a.Complete() {
					s.AuditIncomplete++
				}
			}
		}
		switch {
		case v.Err != "":
		case v.Unsettled != "":
			s.Unsettled++
		case v.States == nil || !v.States.OK() || v.Answered != v.Instances:
			s.StatesDiffer++
		}
	}
	return s
}

// WriteTable writes the summary as a Markdown table.
func (s *Summary) WriteTable(w io.Writer) {
	var kinds []string
	for _, k := range slices.Concat(Kinds, RecordKinds) {
		if n := s.Faults[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	seeds := slices.Clone(s.Failed)
	slices.Sort(seeds)
	failed := make([]string, len(seeds))
	for i, f := range seeds {
		failed[i] = fmt.Sprint(f)
	}
	fmt.Fprintln(w, "| schedules | passed | killing a NATS node | faults applied | decisions checked | matched | lost | lost in outage | duplicated | wrong | late | states differ | unsettled | errors |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	fmt.Fprintf(w, "| %d | %d | %d | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", s.Schedules, s.Passed, s.NodeKills,
		strings.Join(kinds, ", "), s.Checked, s.Matched, s.Lost, s.LostInOutage, s.Duplicated, s.Wrong, s.Late, s.StatesDiffer,
		s.Unsettled, s.Errors)
	if s.Schedules > 0 {
		fmt.Fprintf(w, "\n%d of %d schedules killed a NATS node (%.0f%%; the goal: at least 20%%).\n", s.NodeKills, s.Schedules,
			100*float64(s.NodeKills)/float64(s.Schedules))
	}
	if s.Audited > 0 {
		fmt.Fprintf(w, "\nThe flight recorder's audit passed for %d of %d recordings (%d incomplete: holes left, every decision judged equal; %d messages filled, %d of them frames a resend answer brought).\n",
			s.AuditPassed, s.Audited, s.AuditIncomplete, s.Filled, s.FilledAnswers)
	}
	if len(s.Failed) > 0 {
		fmt.Fprintf(w, "\nFailed seeds: %s\n", strings.Join(failed, ", "))
	}
}
