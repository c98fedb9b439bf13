package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"rgcpred/rgc"
)

// stream is a long synthetic recording: four stimulus rows of flashes
// shared by every cell, and one spike row per cell (Bernoulli(0.05)).
type stream struct {
	stim   [][]float32 // [InRows-1][bins]
	spikes map[int][]float32
}

func newStream(bins int, ids []int, seed uint64) *stream {
	rng := rand.New(rand.NewPCG(seed, 3))
	s := &stream{spikes: map[int][]float32{}}
	for r := 0; r < rgc.SpikeRow; r++ {
		row := make([]float32, bins)
		for t := 0; t < bins; {
			level, hold := float32(rng.Float64()), 8+rng.IntN(120)
			for end := min(bins, t+hold); t < end; t++ {
				row[t] = level
			}
		}
		s.stim = append(s.stim, row)
	}
	for _, id := range ids {
		row := make([]float32, bins)
		for t := range row {
			if rng.Float64() < 0.05 {
				row[t] = 1
			}
		}
		s.spikes[id] = row
	}
	return s
}

// window writes cell id's window ending at bin end into dst.
func (s *stream) window(dst []float32, id, end int) {
	lo := end - rgc.WindowBins + 1
	for r, row := range s.stim {
		copy(dst[r*rgc.WindowBins:(r+1)*rgc.WindowBins], row[lo:end+1])
	}
	copy(dst[rgc.SpikeRow*rgc.WindowBins:], s.spikes[id][lo:end+1])
}

// sameAsWhole runs b on e and on full (which computes every window whole)
// and fails t unless their raw head outputs are the same bits.
func sameAsWhole(t testing.TB, full, e *Engine, b *rgc.Batch, what string) {
	t.Helper()
	n := b.Len() * e.cfg.HeadOut()
	got, want := make([]float32, n), make([]float32, n)
	if err := full.Logits(b, want); err != nil {
		t.Fatal(err)
	}
	if err := e.Logits(b, got); err != nil {
		t.Fatal(err)
	}
	for k := range got {
		if got[k] != want[k] {
			t.Fatalf("%s: output %d = %v, want %v (computed whole)", what, k, got[k], want[k])
		}
	}
}

// TestReuseMatchesFullCompute: windows that carry block 0's rows over from
// their cell's previous window give the same output bits as windows
// computed whole, for every shift a window can carry over, for shifts that
// carry nothing (not a multiple of 4, too large, backwards), on 1 and 2
// threads (split windows compute the two ends' rows in shared chunks), in
// float32, bf16 and int8; and rows are carried exactly when they can be
// (Stats.ReusedWindows).
func TestReuseMatchesFullCompute(t *testing.T) {
	type setting struct {
		name              string
		maxBatch, threads int
		prec              Precision
		every             bool // every multiple of 4 the plans carry over
	}
	settings := []setting{
		{"gpt-a-cat-cpu", 1, 1, FP32, true},
		{"gpt-a-cat-cpu", 1, 2, FP32, true},
		{"gpt-a-cat-cpu", 3, 2, BF16, false},
		{"gpt-a-cat-cpu", 1, 2, INT8, true},
		{"gpt-b-logmix-cpu", 2, 2, FP32, false},
		{"gpt-b-logmix-cpu", 2, 2, INT8, false}, // int8 transformer
		{"gpt-a-cat", 1, 2, FP32, false},
		{"gpt-a-cat", 3, 1, BF16, false},
		{"gpt-a-cat", 3, 2, INT8, false},
	}
	for i, tc := range settings {
		w := randomWeights(t, tc.name, len(cellIDs), uint64(11+i))
		full, err := NewFromWeights(w, cellIDs, tc.maxBatch, 1)
		if err != nil {
			t.Fatal(err)
		}
		full.SetReuse(false)
		e, err := NewFromWeights(w, cellIDs, tc.maxBatch, tc.threads)
		if err != nil {
			t.Fatal(err)
		}
		e.setSpin(spinFor)
		e.wakeParked = true // split windows compute the two ends' rows in shared chunks
		if err := full.Force(tc.prec); err != nil {
			t.Fatal(err)
		}
		if err := e.Force(tc.prec); err != nil {
			t.Fatal(err)
		}
		stride, most := e.net.reuseStride(), len(e.plans)-1
		if stride != 4 || most < 200 {
			t.Fatalf("%s: carries shifts of %d bins up to %d positions, want 4 and > 200", tc.name, stride, most)
		}
		// The shifts each cell moves by, in turn: the daemon's 80 and
		// k+1 after a spike in bin k; the largest shift that carries; and
		// shifts that carry nothing.
		shifts := []int{80, 4, 81, 80, 1, 8, 3, 80, stride * most, 80, stride * (most + 1), 80, 1024, 80, -80, 80, 0, 80, 12, 80}
		if tc.every {
			for u := 1; u <= most; u++ {
				shifts = append(shifts, u*stride)
			}
		}
		total := rgc.WindowBins + 1100
		for _, d := range shifts {
			total += max(d, 0)
		}
		s := newStream(total, cellIDs, uint64(i))
		ends := map[int]int{}
		// The ends of the windows the engine keeps per cell, and when each
		// was last used: a window carries rows over from either.
		type keptEnd struct{ end, used int }
		kept := map[int]*[keptPerCell]keptEnd{}
		var wantReused int64
		n := tc.maxBatch
		b := &rgc.Batch{Inputs: make([]float32, n*rgc.WindowLen), Cells: make([]int, n), Ends: make([]int, n)}
		for step, d := range shifts {
			for j := range n {
				id := cellIDs[(step+j)%len(cellIDs)]
				if end, ok := ends[id]; ok {
					ends[id] = end + d
				} else {
					ends[id] = rgc.WindowBins + 1000 + 13*j
					kept[id] = &[keptPerCell]keptEnd{}
				}
				k := kept[id]
				slot := -1
				for q, ke := range k {
					if dd := ends[id] - ke.end; ke.used > 0 && dd > 0 && dd%stride == 0 && dd/stride <= most {
						slot = q
						wantReused++
						break
					}
				}
				if slot < 0 {
					slot = 0
					for q := range k {
						if k[q].used < k[slot].used {
							slot = q
						}
					}
				}
				k[slot] = keptEnd{ends[id], step + 1}
				b.Cells[j], b.Ends[j] = id, ends[id]
				s.window(b.Inputs[j*rgc.WindowLen:(j+1)*rgc.WindowLen], id, ends[id])
			}
			sameAsWhole(t, full, e, b, fmt.Sprintf("%+v, step %d (shift %d)", tc, step, d))
		}
		if st := e.Stats(); st.ReusedWindows != wantReused || wantReused == 0 {
			t.Errorf("%+v: %d windows carried rows over, want %d", tc, st.ReusedWindows, wantReused)
		}
		full.Close()
		e.Close()
	}
}

// TestReuseOnlyWhatMatches: a window carries nothing over when its Ends
// says it moved on but its bins say otherwise (the previous window was of
// another stream), when the cell's kept windows serve other windows of the
// call, or when the engine's arithmetic changed since its cell's last
// window; two streams of one cell each carry their own rows over; outputs
// stay those computed whole.
func TestReuseOnlyWhatMatches(t *testing.T) {
	w := randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 4)
	full, err := NewFromWeights(w, cellIDs, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	full.SetReuse(false)
	e, err := NewFromWeights(w, cellIDs, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.setSpin(time.Millisecond)
	e.wakeParked = true
	s, other := newStream(20000, cellIDs, 1), newStream(20000, cellIDs, 2)
	id := cellIDs[0]
	call := func(t *testing.T, wantReused int64, srcs []*stream, ends []int) {
		t.Helper()
		n := len(ends)
		b := &rgc.Batch{Inputs: make([]float32, n*rgc.WindowLen), Cells: make([]int, n), Ends: ends}
		for j := range n {
			b.Cells[j] = id
			srcs[j].window(b.Inputs[j*rgc.WindowLen:], id, ends[j])
		}
		before := e.Stats().ReusedWindows
		sameAsWhole(t, full, e, b, fmt.Sprintf("windows ending at %v", ends))
		if r := e.Stats().ReusedWindows - before; r != wantReused {
			t.Fatalf("%d windows carried rows over, want %d", r, wantReused)
		}
	}
	call(t, 0, []*stream{s}, []int{5000})
	call(t, 1, []*stream{s}, []int{5080})
	call(t, 0, []*stream{other}, []int{5160})                   // Ends moved on, the bins did not
	call(t, 1, []*stream{other, s, s}, []int{5240, 5000, 5320}) // later windows of the cell compute whole
	if err := e.Force(BF16); err != nil {
		t.Fatal(err)
	}
	if err := full.Force(BF16); err != nil {
		t.Fatal(err)
	}
	call(t, 0, []*stream{other}, []int{5320}) // rows kept in float32
	call(t, 1, []*stream{other}, []int{5400})
	if err := e.Force(INT8); err != nil {
		t.Fatal(err)
	}
	if err := full.Force(INT8); err != nil {
		t.Fatal(err)
	}
	call(t, 0, []*stream{other}, []int{5480}) // rows kept in bf16
	if err := e.Force(BF16); err != nil {
		t.Fatal(err)
	}
	if err := full.Force(BF16); err != nil {
		t.Fatal(err)
	}
	e.SetReuse(false)
	call(t, 0, []*stream{other}, []int{5480})
	e.SetReuse(true)
	call(t, 0, []*stream{other}, []int{5560})
	call(t, 1, []*stream{other}, []int{5640})
	// Two streams of the cell in turn (one cell served to two devices):
	// each carries its rows over from its own last window.
	e.SetReuse(false)
	e.SetReuse(true)
	call(t, 0, []*stream{s}, []int{6000})
	call(t, 0, []*stream{other}, []int{6000})
	call(t, 1, []*stream{s}, []int{6080})
	call(t, 1, []*stream{other}, []int{6080})
	call(t, 2, []*stream{s, other}, []int{6160, 6160})
}

// TestRowPlans: the rows a shift of 80 bins computes in the paper's
// geometry, derived by hand from docs/model.md section 2.1 (conv1 k21 s2,
// conv2 k21, block 0 conv2 k7 s2, padding k/2): block 0's positions 9..227
// are carried, so positions 0..9 and 227..256 are computed, from h1 rows
// 0..20 and 451..512 and conv1 rows 0..30 and 441..512.
func TestRowPlans(t *testing.T) {
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu", "gpt-b-cat"} {
		e, err := NewFromWeights(randomWeights(t, name, len(cellIDs), 1), cellIDs, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		p := e.plans[80/e.net.reuseStride()]
		e.Close()
		want := rowPlan{
			c1:  spans{s: [2]span{{0, 30}, {441, 512}}, n: 2},
			c2:  spans{s: [2]span{{0, 20}, {451, 512}}, n: 2},
			h1:  spans{s: [2]span{{0, 20}, {451, 512}}, n: 2},
			out: spans{s: [2]span{{0, 9}, {227, 256}}, n: 2},
		}
		if p != want {
			t.Errorf("%s: shift 80: %+v, want %+v", name, p, want)
		}
	}
	sp := spans{s: [2]span{{0, 9}, {227, 256}}, n: 2}
	for _, tc := range []struct{ k, v0, v1, lo, hi int }{
		{0, 0, 38, 0, 9}, {1, 0, 38, 227, 256}, {0, 4, 8, 4, 8}, {1, 4, 8, 227, 227},
		{0, 8, 12, 8, 9}, {1, 8, 12, 227, 230}, {1, 36, 38, 254, 256}, {2, 0, 38, 0, 0},
	} {
		if lo, hi := sp.part(tc.k, tc.v0, tc.v1); (hi > lo || tc.hi > tc.lo) && (lo != tc.lo || hi != tc.hi) {
			t.Errorf("part(%d, %d, %d) = %d..%d, want %d..%d", tc.k, tc.v0, tc.v1, lo, hi, tc.lo, tc.hi)
		}
	}
}

// TestReuseZeroAllocs: windows that carry rows over allocate nothing.
func TestReuseZeroAllocs(t *testing.T) {
	e, err := NewFromWeights(randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 8), cellIDs, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := newMover(e, 40)
	m.next(t) // each cell's first window
	m.next(t)
	m.next(t)
	before := e.Stats().ReusedWindows
	if allocs := testing.AllocsPerRun(20, func() { m.next(t) }); allocs != 0 {
		t.Errorf("%v allocations per Predict, want 0", allocs)
	}
	if r := e.Stats().ReusedWindows - before; r < 20 {
		t.Errorf("%d of the measured windows carried rows over, want all", r)
	}
}

// mover calls an engine with one window at a time, the cells in turn, each
// cell's window 80 bins on from its last (the daemon's step after "no
// spike"), from windows made in advance.
type mover struct {
	e    *Engine
	wins []rgc.Batch
	out  []float32
	i    int
}

func newMover(e *Engine, n int) *mover {
	per := n/len(cellIDs) + 1
	s := newStream(rgc.WindowBins+80*per+100, cellIDs, 5)
	m := &mover{e: e, out: make([]float32, rgc.NumClasses)}
	for i := range n {
		id, end := cellIDs[i%len(cellIDs)], rgc.WindowBins+80*(i/len(cellIDs))
		b := rgc.Batch{Inputs: make([]float32, rgc.WindowLen), Cells: []int{id}, Ends: []int{end}}
		s.window(b.Inputs, id, end)
		m.wins = append(m.wins, b)
	}
	return m
}

// group makes each call k windows: the next k windows in turn, of k
// different cells when k is at most len(cellIDs).
func (m *mover) group(k int) *mover {
	var bs []rgc.Batch
	for i := 0; i+k <= len(m.wins); i += k {
		var b rgc.Batch
		for _, w := range m.wins[i : i+k] {
			b.Inputs = append(b.Inputs, w.Inputs...)
			b.Cells = append(b.Cells, w.Cells...)
			b.Ends = append(b.Ends, w.Ends...)
		}
		bs = append(bs, b)
	}
	m.wins, m.i, m.out = bs, 0, make([]float32, k*rgc.NumClasses)
	return m
}

// next predicts the next window, going round to the first after the last
// (whose shift back carries nothing over).
func (m *mover) next(t testing.TB) {
	if err := m.e.Predict(&m.wins[m.i], m.out); err != nil {
		t.Fatal(err)
	}
	m.i = (m.i + 1) % len(m.wins)
}
