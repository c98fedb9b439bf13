package nemesis

import (
	"fmt"
	"strings"
	"testing"
)

func TestUnsettled(t *testing.T) {
	const last = 5000
	st := func(last int64, cand int) []byte {
		seqs := make([]string, cand)
		for i := range seqs {
			seqs[i] = fmt.Sprint(last + 10 + int64(i))
		}
		return fmt.Appendf(nil, `{"started":true,"last":%d,"cand_seqs":[%s],"next":[1,2]}`, last, strings.Join(seqs, ","))
	}
	done, behind, cand := st(last, 0), st(4200, 0), st(last, 3)
	for _, tc := range []struct {
		name          string
		answers, prev [][]byte
		synced        int
		want          string // a part of the reason; "" settled
	}{
		{"both at the last frame", [][]byte{done, done}, nil, 2, ""},
		{"both at the last frame, states differ", [][]byte{done, []byte(`{"started":true,"last":5000,"cand_seqs":[],"next":[1,3]}`)}, nil, 2, ""},
		{"one not synced", [][]byte{done}, nil, 1, "1 of 2 instances synced"},
		{"synced, one did not answer", [][]byte{done}, nil, 2, "1 of 2 instances answered"},
		{"one holds a candidate", [][]byte{done, cand}, nil, 2, "candidate numbering (3 frames)"},
		{"a candidate that stopped changing", [][]byte{done, cand}, [][]byte{cand, done}, 2, "candidate"},
		{"one still catching up", [][]byte{done, behind}, nil, 2, "at frame 4200 of 5000"},
		{"one behind, changed since the last poll", [][]byte{done, behind}, [][]byte{done, st(4100, 0)}, 2, "still changing"},
		{"one behind that stopped changing", [][]byte{behind, done}, [][]byte{done, behind}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, err := unsettled(tc.answers, tc.prev, 2, tc.synced, last)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && why != "" || tc.want != "" && !strings.Contains(why, tc.want) {
				t.Fatalf("unsettled %q, want %q", why, tc.want)
			}
		})
	}
	if _, err := unsettled([][]byte{done, []byte("{")}, nil, 2, 2, last); err == nil {
		t.Fatal("an answer that does not decode passed")
	}
}

func TestSameStates(t *testing.T) {
	a, b := []byte("a"), []byte("b")
	for _, tc := range []struct {
		x, y [][]byte
		want bool
	}{
		{[][]byte{a, b}, [][]byte{b, a}, true},
		{[][]byte{a, b}, [][]byte{a, a}, false},
		{[][]byte{a}, [][]byte{a, a}, false},
		{nil, nil, true},
	} {
		if got := sameStates(tc.x, tc.y); got != tc.want {
			t.Errorf("sameStates(%q, %q) = %v", tc.x, tc.y, got)
		}
	}
}
