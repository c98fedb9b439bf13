package nemesis

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"rgcpred/bench/history"
	"rgcpred/serve/recorder"
)

func TestPlan(t *testing.T) {
	const ttl = 60 * time.Millisecond
	for _, tc := range []struct {
		name   string
		seed   uint64
		length time.Duration
		kinds  []Kind
	}{
		{"all kinds", 1, 30 * time.Second, Kinds},
		{"another seed", 2, 30 * time.Second, Kinds},
		{"node kills only", 3, 30 * time.Second, []Kind{KillNode, KillMetaLeader, KillLeaseLeader}},
		{"pauses only", 4, 10 * time.Second, []Kind{PauseHolder, PauseStandby}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Plan(tc.seed, tc.length, ttl, tc.kinds)
			if len(p) == 0 {
				t.Fatal("no fault planned")
			}
			if !reflect.DeepEqual(p, Plan(tc.seed, tc.length, ttl, tc.kinds)) {
				t.Fatal("the same seed planned differently")
			}
			var used time.Duration
			for _, f := range p {
				used += f.Gap + f.For
				if f.Gap < time.Second {
					t.Errorf("%s: gap %v under a second", f.Kind, f.Gap)
				}
				switch f.Kind {
				case PauseHolder, PauseStandby:
					if f.For < 3*ttl {
						t.Errorf("pause of %v is not past the TTL %v", f.For, ttl)
					}
				case SlowLink:
					if f.Latency <= 0 {
						t.Error("slow link without latency")
					}
				case Burst:
					if f.Count < 100 {
						t.Errorf("burst of %d", f.Count)
					}
				}
			}
			if used > tc.length {
				t.Fatalf("plan lasts %v, over %v", used, tc.length)
			}
		})
	}
	if p := Plan(1, 30*time.Second, ttl, []Kind{}); p != nil {
		t.Fatalf("no kinds planned %v", p)
	}
	if reflect.DeepEqual(Plan(1, 30*time.Second, ttl, Kinds), Plan(2, 30*time.Second, ttl, Kinds)) {
		t.Fatal("two seeds planned the same")
	}
}

// TestPlanKillsNode checks the share of schedules killing a NATS node: every
// plan drawing from a node-killing kind holds one, so any number of
// schedules has at least the 20%; plans without one keep the rest
// of their rules, and kinds without a node kill plan none.
func TestPlanKillsNode(t *testing.T) {
	const ttl = 60 * time.Millisecond
	for _, tc := range []struct {
		name   string
		length time.Duration
		kinds  []Kind
	}{
		{"all kinds, 30 s", 30 * time.Second, Kinds},
		{"all kinds, 8 s", 8 * time.Second, Kinds},
		{"all kinds, 5 s", 5 * time.Second, Kinds},
		{"node kills among others", 20 * time.Second, []Kind{Burst, SlowLink, KillLeaseLeader}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forced := 0
			for seed := uint64(1); seed <= 200; seed++ {
				p := Plan(seed, tc.length, ttl, tc.kinds)
				k := slices.IndexFunc(p, func(f Fault) bool { return f.Kind.KillsNode() })
				if k < 0 {
					t.Fatalf("seed %d: no node killed in %v", seed, p)
				}
				if k == 0 && !slices.Contains(tc.kinds, p[0].Kind) {
					t.Fatalf("seed %d: forced kind %s not drawn from", seed, p[0].Kind)
				}
				var used time.Duration
				for _, f := range p {
					used += f.Gap + f.For
				}
				if used > tc.length {
					t.Fatalf("seed %d: plan lasts %v", seed, used)
				}
				if k == 0 && p[0].Gap <= 3*time.Second {
					forced++
				}
			}
			if forced == 0 {
				t.Fatal("no plan starts with a node kill")
			}
		})
	}
	for seed := uint64(1); seed <= 50; seed++ {
		for _, f := range Plan(seed, 30*time.Second, ttl, []Kind{Burst, Outage, PartitionNode}) {
			if f.Kind.KillsNode() {
				t.Fatalf("seed %d: %s planned from kinds without it", seed, f.Kind)
			}
		}
	}
}

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		in     string
		record bool
		n      int
		fail   bool
	}{
		{"all", false, len(Kinds), false},
		{"all", true, len(Kinds) + len(RecordKinds), false},
		{"none", true, 0, false},
		{"kill-node,burst", false, 2, false},
		{"kill-node,explode", false, 0, true},
		{"kill-record-leader", false, 0, true},
		{"kill-record-leader,outage", true, 2, false},
	} {
		k, err := ParseKinds(tc.in, tc.record)
		if (err != nil) != tc.fail || len(k) != tc.n {
			t.Errorf("%q (record %v): %v, %v", tc.in, tc.record, k, err)
		}
		if !tc.record && slices.Contains(k, KillRecordLeader) {
			t.Errorf("%q without the recorder: %v", tc.in, k)
		}
	}
}

// TestPlanRecordKinds: the recorder's kinds leave the plans of the other
// kinds as they were, and a record leader kill counts as a node kill.
func TestPlanRecordKinds(t *testing.T) {
	ttl := 60 * time.Millisecond
	for seed := uint64(1); seed <= 30; seed++ {
		only := Plan(seed, 30*time.Second, ttl, []Kind{KillRecordLeader})
		if len(only) == 0 {
			t.Fatalf("seed %d: nothing planned", seed)
		}
		for _, f := range only {
			if f.Kind != KillRecordLeader || f.For < time.Second || f.For > 5*time.Second {
				t.Fatalf("seed %d: %+v", seed, f)
			}
		}
		all, _ := ParseKinds("all", false)
		if !reflect.DeepEqual(Plan(seed, 30*time.Second, ttl, all), Plan(seed, 30*time.Second, ttl, Kinds)) {
			t.Fatalf("seed %d: \"all\" without the recorder plans otherwise than Kinds", seed)
		}
	}
	if !KillRecordLeader.KillsNode() {
		t.Fatal("kill-record-leader does not count as a node kill")
	}
}

func TestSummarise(t *testing.T) {
	same := &history.StateReport{Replicas: 2, Distinct: 1}
	vs := []*Verdict{
		{Seed: 3, Instances: 2, Answered: 2, Faults: []Fault{{Kind: KillNode}, {Kind: Burst, Skipped: "not reached"}}},
		{Seed: 4, Err: "boom", Faults: []Fault{{Kind: KillHolder}}},
		{Seed: 1, Instances: 2, Answered: 2, History: nil},
		{Seed: 5, Instances: 2, Answered: 2, Faults: []Fault{{Kind: Outage}}, States: same,
			History: &history.Report{Expected: 10, Matched: 7, Lost: 1, LostInOutage: 2}},
		{Seed: 6, Instances: 2, Answered: 1, Unsettled: "1 of 2 instances synced", States: &history.StateReport{Replicas: 1, Distinct: 1},
			History: &history.Report{Expected: 10, Matched: 10}},
		{Seed: 7, Instances: 2, Answered: 2, Faults: []Fault{{Kind: KillMetaLeader}}, States: same,
			History: &history.Report{Expected: 10, Matched: 8, LostInOutage: 2}},
		{Seed: 8, Instances: 2, Answered: 2, Faults: []Fault{{Kind: KillRecordLeader}}, States: same,
			History: &history.Report{Expected: 10, Matched: 10}, Recording: &Recording{Err: "no stream"}},
		{Seed: 9, Instances: 2, Answered: 2, States: same, History: &history.Report{Expected: 10, Matched: 10},
			Recording: &Recording{Audit: &recorder.Report{Recorded: 10, Matched: 10}}},
	}
	s := Summarise(vs)
	if s.Schedules != 8 || s.Passed != 2 || s.NodeKills != 3 || s.Faults[KillRecordLeader] != 1 || s.Audited != 2 || s.AuditPassed != 1 || s.Faults[KillNode] != 1 || s.Faults[Burst] != 0 || s.Faults[Outage] != 1 ||
		s.Errors != 1 || s.Unsettled != 1 || s.StatesDiffer != 2 || s.Lost != 1 || s.LostInOutage != 4 || s.Checked != 50 ||
		!reflect.DeepEqual(s.Failed, []uint64{3, 4, 1, 5, 6, 8}) {
		t.Fatalf("%+v", s)
	}
	var b strings.Builder
	s.WriteTable(&b)
	for _, want := range []string{"| lost | lost in outage |", "| 1 | 4 |", "3 of 8 schedules killed a NATS node (38%", "kill-record-leader 1",
		"audit passed for 1 of 2 recordings", "Failed seeds: 1, 3, 4, 5, 6, 8"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
