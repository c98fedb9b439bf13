package nemesis

import (
	"reflect"
	"testing"
	"time"
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

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		fail bool
	}{
		{"all", len(Kinds), false}, {"none", 0, false}, {"kill-node,burst", 2, false}, {"kill-node,explode", 0, true},
	} {
		k, err := ParseKinds(tc.in)
		if (err != nil) != tc.fail || len(k) != tc.n {
			t.Errorf("%q: %v, %v", tc.in, k, err)
		}
	}
}

func TestSummarise(t *testing.T) {
	pass := &Verdict{Seed: 1, Instances: 2, Answered: 2, History: nil}
	vs := []*Verdict{
		{Seed: 3, Instances: 2, Answered: 2, Faults: []Fault{{Kind: KillNode}, {Kind: Burst, Skipped: "not reached"}}},
		{Seed: 4, Err: "boom", Faults: []Fault{{Kind: KillHolder}}},
		pass,
	}
	s := Summarise(vs)
	if s.Schedules != 3 || s.Passed != 0 || s.NodeKills != 1 || s.Faults[KillNode] != 1 || s.Faults[Burst] != 0 || s.Errors != 1 ||
		!reflect.DeepEqual(s.Failed, []uint64{3, 4, 1}) {
		t.Fatalf("%+v", s)
	}
}
