package history

import (
	"encoding/json"
	"strings"
	"testing"

	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// twoCells is a reference of two cells: cell 7 spikes 3 bins after its
// first window and is then silent; cell 9 is silent throughout.
func twoCells(t *testing.T) *Reference {
	t.Helper()
	res := &rollout.Result{From: 1024, To: 1400, Trains: []rollout.Train{
		{ClusterID: 7, Windows: 4, Start: 1023, Choices: []rollout.Choice{{End: 1023, Class: 2}, {End: 1026, Class: rgc.Horizon}, {End: 1106, Class: rgc.Horizon}, {End: 1186, Class: rgc.Horizon}}},
		{ClusterID: 9, Windows: 2, Start: 1063, Choices: []rollout.Choice{{End: 1063, Class: rgc.Horizon}, {End: 1143, Class: rgc.Horizon}}},
	}}
	ref, err := NewReference(res)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// decided returns the device's copy of ref's decisions of a cell, epoch 3.
func decided(ref *Reference, cell int32) []stream.Decision {
	var out []stream.Decision
	for _, w := range ref.Cell(cell) {
		k := uint8(stream.KindSilence)
		if w.Spike {
			k = stream.KindSpike
		}
		out = append(out, stream.Decision{Cell: cell, Kind: k, End: w.End, Bin: w.Bin, Epoch: 3})
	}
	return out
}

func TestCheck(t *testing.T) {
	ref := twoCells(t)
	all := append(decided(ref, 7), decided(ref, 9)...)
	cases := []struct {
		name                        string
		got                         func() []stream.Decision
		matched, lost, dup, wrong   int64
		late, foreign, beyond, skip int64
		outages                     []Span
		inOutage                    int64
	}{
		{name: "exactly once", got: func() []stream.Decision { return all }, matched: 6},
		{name: "one lost", got: func() []stream.Decision {
			return append(append([]stream.Decision{}, all[:2]...), all[3:]...)
		}, matched: 5, lost: 1},
		{name: "nothing received", got: func() []stream.Decision { return nil }, lost: 6},
		{name: "duplicated", got: func() []stream.Decision {
			return append(append([]stream.Decision{}, all...), all[1], all[4])
		}, matched: 6, dup: 2, late: 2},
		{name: "wrong class", got: func() []stream.Decision {
			g := append([]stream.Decision{}, all...)
			g[0].Bin++
			return g
		}, matched: 5, wrong: 1},
		{name: "a window the reference never decides", got: func() []stream.Decision {
			g := append([]stream.Decision{}, all...)
			return append(g, stream.Decision{Cell: 9, Kind: stream.KindSilence, End: 1200, Bin: 1280, Epoch: 3})
		}, matched: 6, wrong: 1},
		{name: "from before the reset", got: func() []stream.Decision {
			old := all[0]
			old.Epoch = 2
			return append([]stream.Decision{old}, all...)
		}, matched: 6, late: 1},
		{name: "skipped where the reference spikes", got: func() []stream.Decision {
			g := append([]stream.Decision{}, all...)
			g[0].Kind, g[0].Bin = stream.KindSkipped, g[0].End+rgc.Horizon
			return g
		}, matched: 5, wrong: 1, skip: 1},
		{name: "other cells and windows past the stretch", got: func() []stream.Decision {
			g := append([]stream.Decision{}, all...)
			return append(g, stream.Decision{Cell: 1, End: 1100, Bin: 1180, Epoch: 3}, stream.Decision{Cell: 7, End: 1399, Bin: 1479, Epoch: 3})
		}, matched: 6, foreign: 1, beyond: 1},
		// all: cell 7 at 1023, 1026, 1106, 1186; cell 9 at 1063, 1143.
		{name: "lost in a declared outage and outside it", got: func() []stream.Decision {
			return []stream.Decision{all[0], all[1], all[3], all[4]}
		}, matched: 4, lost: 1, outages: []Span{{From: 1100, To: 1110}}, inOutage: 1},
		{name: "an outage's bounds are in it", got: func() []stream.Decision {
			return []stream.Decision{all[0], all[1], all[3], all[4]}
		}, matched: 4, outages: []Span{{From: 1050, To: 1106}, {From: 1143, To: 1143}}, inOutage: 2},
		{name: "an outage excuses nothing but losses", got: func() []stream.Decision {
			g := append([]stream.Decision{}, all...)
			g[2].Bin++
			return append(g, all[5])
		}, matched: 5, wrong: 1, dup: 1, outages: []Span{{From: 1000, To: 1400}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckOutages(ref, tc.got(), 3, tc.outages)
			if r.Expected != 6 || r.Matched != tc.matched || r.Lost != tc.lost || r.Duplicated != tc.dup || r.Wrong != tc.wrong ||
				r.Late != tc.late || r.Foreign != tc.foreign || r.Beyond != tc.beyond || r.Skipped != tc.skip || r.LostInOutage != tc.inOutage {
				t.Fatalf("got %+v", r)
			}
			if ok := tc.lost+tc.dup+tc.wrong+tc.late == 0; r.OK() != ok || strings.HasPrefix(r.String(), "PASS") != ok {
				t.Fatalf("OK %v, String %q; want OK %v", r.OK(), r, ok)
			}
			if !r.OK() && len(r.Examples) == 0 {
				t.Fatal("a failed check names no example")
			}
		})
	}
}

func TestNewReferenceNeedsChoices(t *testing.T) {
	_, err := NewReference(&rollout.Result{To: 2000, Trains: []rollout.Train{{ClusterID: 1, Windows: 3}}})
	if err == nil || !strings.Contains(err.Error(), "KeepChoices") {
		t.Fatalf("err %v", err)
	}
}

func TestDuplicates(t *testing.T) {
	d := []stream.Decision{{Cell: 1, End: 5, Epoch: 1}, {Cell: 1, End: 5, Epoch: 1}, {Cell: 1, End: 5, Epoch: 2}, {Cell: 2, End: 5, Epoch: 1}, {Cell: 1, End: 5, Epoch: 1}}
	if n := Duplicates(d); n != 2 {
		t.Fatalf("%d duplicates, want 2", n)
	}
}

func TestLostAtLeast(t *testing.T) {
	for _, tc := range []struct{ gap, want int64 }{{0, 0}, {-3, 0}, {1, 1}, {rgc.Horizon, 1}, {rgc.Horizon + 1, 2}, {6093 * rgc.Horizon, 6093}} {
		if got := LostAtLeast(tc.gap); got != tc.want {
			t.Errorf("LostAtLeast(%d) = %d, want %d", tc.gap, got, tc.want)
		}
	}
}

func TestCompareStates(t *testing.T) {
	a, _ := json.Marshal(map[string]any{"epoch": 3, "last": 100, "next": []int{5, 6}})
	b, _ := json.Marshal(map[string]any{"epoch": 3, "last": 100, "next": []int{5, 7}})
	c, _ := json.Marshal(map[string]any{"epoch": 4, "last": 100})
	for _, tc := range []struct {
		name     string
		states   [][]byte
		distinct int
		fields   string
	}{
		{"identical", [][]byte{a, a, a}, 1, ""},
		{"one differs", [][]byte{a, a, b}, 2, "next"},
		{"field missing", [][]byte{a, c}, 2, "epoch,next"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := CompareStates(tc.states)
			if err != nil {
				t.Fatal(err)
			}
			if r.Distinct != tc.distinct || strings.Join(r.Fields, ",") != tc.fields || r.OK() != (tc.distinct == 1) || r.Replicas != len(tc.states) {
				t.Fatalf("got %+v (%s)", r, r)
			}
		})
	}
	if _, err := CompareStates([][]byte{a, []byte("{")}); err == nil {
		t.Fatal("a state that does not decode passed")
	}
}

// TestCheckNamesFilled: a wrong decision whose window was filled across a
// gap says so in its example; one that was not does not.
func TestCheckNamesFilled(t *testing.T) {
	ref := twoCells(t)
	for _, filled := range []bool{false, true} {
		g := append(decided(ref, 7), decided(ref, 9)...)
		g[0].Bin++
		if filled {
			g[0].Flags |= stream.FlagFilled
		}
		r := Check(ref, g, 3)
		if r.Wrong != 1 || len(r.Examples) == 0 {
			t.Fatalf("filled %v: %+v", filled, r)
		}
		if got := strings.Contains(r.Examples[0], "filled across a gap"); got != filled {
			t.Errorf("filled %v: example %q", filled, r.Examples[0])
		}
	}
}
