package engine

import (
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"rgcpred/internal/sgemm"
	"rgcpred/model"
	"rgcpred/rgc"
)

const shippedData = "../../data/chicken-17-08-21"

var shippedRec = sync.OnceValues(func() (*rgc.Recording, error) { return rgc.Load(shippedData) })

// realWindows returns n windows of the shipped recording's test split for
// the checkpoint's cells, spread evenly over cells and time.
func realWindows(t testing.TB, ck *model.Checkpoint, n int) *rgc.Batch {
	t.Helper()
	rec, err := shippedRec()
	if err != nil {
		t.Fatal(err)
	}
	known := map[int]bool{}
	for _, id := range ck.CellIDs {
		known[id] = true
	}
	var cells []int
	for i, c := range rec.Cells {
		if known[c.ClusterID] {
			cells = append(cells, i)
		}
	}
	first, _, nw := rec.WindowRange(rgc.Test)
	if len(cells) == 0 || nw == 0 {
		t.Fatalf("no test windows for the checkpoint's cells")
	}
	refs := make([]rgc.WindowRef, n)
	for i := range refs {
		refs[i] = rgc.WindowRef{Cell: cells[i%len(cells)], T: first + int(int64(i)*int64(nw)/int64(n))}
	}
	b := &rgc.Batch{}
	rec.FillBatch(refs, b, nil)
	return b
}

func loadShipped(t testing.TB, name string) *model.Checkpoint {
	t.Helper()
	ck, err := model.LoadCheckpoint(filepath.Join("..", "..", "models", name+".ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// TestBF16ParityRealWindows: on real windows of the shipped recording and
// the shipped checkpoints, the bf16 path keeps every probability and every
// value of the cumulative distribution within BF16MaxProbDiff of the
// float32 path, and so the median class on every window whose median is
// decided by more than that; medians that do move go to a neighbouring
// class. On 1 and 2 threads, whose bf16 outputs are bit-identical (as
// float32's are).
func TestBF16ParityRealWindows(t *testing.T) {
	if !sgemm.BF16Native() {
		t.Skip("bf16 kernels not native here (no AVX512_BF16, or the purego build): the engine stays on float32")
	}
	const windows = 512
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu"} {
		ck := loadShipped(t, name)
		batch := realWindows(t, ck, windows)
		probe := realWindows(t, ck, 8)
		var outs [][]float32
		// One thread; two threads with whole windows per thread; two
		// threads with every third window split across them.
		for _, tc := range []struct{ threads, maxBatch int }{{1, 32}, {2, 32}, {2, 3}} {
			e, err := New(ck, tc.maxBatch, tc.threads)
			if err != nil {
				t.Fatal(err)
			}
			par, err := e.CompareBF16(batch)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s threads %d batch %d: %v", name, tc.threads, tc.maxBatch, par)
			if !par.OK() {
				t.Errorf("%s threads %d batch %d: bf16 parity fails: %v", name, tc.threads, tc.maxBatch, par)
			}
			got, _, err := e.SetPrecision(BF16, probe)
			if err != nil || got != BF16 || e.Precision() != BF16 {
				t.Fatalf("%s: SetPrecision(bf16) = %v, %v; Precision() = %v", name, got, err, e.Precision())
			}
			out := make([]float32, windows*rgc.NumClasses)
			if err := e.Predict(batch, out); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, out)
			e.Close()
		}
		// Where a median moves, the float32 cumulative distribution stays
		// within the tolerance of 0.5 from one median to the other.
		e, err := New(ck, 32, 2)
		if err != nil {
			t.Fatal(err)
		}
		out32 := make([]float32, windows*rgc.NumClasses)
		if err := e.Predict(batch, out32); err != nil {
			t.Fatal(err)
		}
		e.Close()
		for i := 0; i < windows; i++ {
			p32 := out32[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
			m32, m16 := model.Median(p32), model.Median(outs[0][i*rgc.NumClasses:(i+1)*rgc.NumClasses])
			var cdf float64
			for k, p := range p32[:max(m32, m16)] {
				cdf += float64(p)
				if k >= min(m32, m16) && math.Abs(cdf-0.5) > BF16MaxProbDiff {
					t.Errorf("%s window %d: median class %d on bf16, %d on float32, whose CDF at class %d is %.4f", name, i, m16, m32, k, cdf)
				}
			}
		}
		for i := 1; i < len(outs); i++ {
			for j := range outs[0] {
				if math.Float32bits(outs[i][j]) != math.Float32bits(outs[0][j]) {
					t.Fatalf("%s: bf16 output %d differs between thread/batch settings: %v vs %v", name, j, outs[i][j], outs[0][j])
				}
			}
		}
	}
}

// TestSetPrecision: bf16 takes effect on synthetic probe windows, FP32
// brings back the float32 outputs bit for bit, and a failed parity check
// (tolerance 0) leaves the engine on float32.
func TestSetPrecision(t *testing.T) {
	ck := loadShipped(t, "gpt-a-cat-cpu")
	e, err := New(ck, 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Precision() != FP32 {
		t.Fatalf("default precision %v, want fp32", e.Precision())
	}
	batch := realWindows(t, ck, 8)
	want := make([]float32, 8*rgc.NumClasses)
	if err := e.Predict(batch, want); err != nil {
		t.Fatal(err)
	}
	got, par, err := e.SetPrecision(BF16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sgemm.BF16Native() {
		if got != FP32 || e.Precision() != FP32 {
			t.Fatalf("without AVX512_BF16: SetPrecision(bf16) = %v, Precision() = %v, want fp32", got, e.Precision())
		}
		return
	}
	t.Logf("synthetic probe: %v", par)
	if got != BF16 || e.Precision() != BF16 || par.Windows == 0 {
		t.Fatalf("SetPrecision(bf16) = %v (%v), Precision() = %v", got, par, e.Precision())
	}
	out := make([]float32, len(want))
	if err := e.Predict(batch, out); err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range out {
		same = same && out[i] == want[i]
	}
	if same {
		t.Fatal("bf16 outputs equal the float32 ones bit for bit: the bf16 path is not running")
	}
	if allocs := testing.AllocsPerRun(5, func() { _ = e.Predict(batch, out) }); allocs != 0 {
		t.Errorf("bf16 Predict: %v allocations per call, want 0", allocs)
	}
	if got, _, err := e.SetPrecision(FP32, nil); err != nil || got != FP32 || e.Precision() != FP32 {
		t.Fatalf("SetPrecision(fp32) = %v, %v", got, err)
	}
	if err := e.Predict(batch, out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
			t.Fatalf("back on fp32: output %d = %v, want %v", i, out[i], want[i])
		}
	}
	// A parity check that cannot pass: the engine must stay on float32.
	defer func(tol float64) { bf16Tol = tol }(bf16Tol)
	bf16Tol = 0
	got, par, err = e.SetPrecision(BF16, batch)
	if err != nil || got != FP32 || e.Precision() != FP32 || par.OK() {
		t.Fatalf("failing parity: SetPrecision(bf16) = %v (%v, ok %v), %v; Precision() = %v", got, par, par.OK(), err, e.Precision())
	}
	if _, _, err := e.SetPrecision("fp16", nil); err == nil {
		t.Error("SetPrecision(fp16): no error")
	}
}

func TestParsePrecision(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Precision
		ok   bool
	}{{"fp32", FP32, true}, {"bf16", BF16, true}, {"", "", false}, {"BF16", "", false}, {"fp16", "", false}} {
		got, err := ParsePrecision(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParsePrecision(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestParityOK(t *testing.T) {
	for _, tc := range []struct {
		p    Parity
		want bool
	}{
		{Parity{Windows: 10, MaxProbDiff: BF16MaxProbDiff}, true},
		{Parity{Windows: 10, MaxProbDiff: 2 * BF16MaxProbDiff}, false},
		{Parity{Windows: 10, MedianMismatches: 1, Close: 1}, true},
		{Parity{Windows: 10, MedianMismatches: 1, DecidedMismatches: 1}, false},
		{Parity{Windows: 10, MaxCDFDiff: 2 * BF16MaxProbDiff}, false},
		{Parity{Windows: 10, MaxProbDiff: math.Inf(1)}, false},
		{Parity{}, false},
	} {
		if got := tc.p.OK(); got != tc.want {
			t.Errorf("%v: OK() = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// TestForceBF16: on any CPU (the portable kernels where AVX512_BF16 is
// missing) Force(BF16) runs the bf16 path: outputs within the parity
// tolerance of float32 but not equal to them, the same bits on 1 and 2
// threads, and where the CPU runs bf16 natively the same bits as an engine
// that passed SetPrecision(BF16).
func TestForceBF16(t *testing.T) {
	ck := loadShipped(t, "gpt-a-cat-cpu")
	batch := realWindows(t, ck, 5)
	n := batch.Len() * rgc.NumClasses
	run := func(threads int, set func(e *Engine)) []float32 {
		t.Helper()
		e, err := New(ck, 8, threads)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		set(e)
		out := make([]float32, n)
		if err := e.Predict(batch, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	fp32 := run(1, func(*Engine) {})
	forced := run(1, func(e *Engine) {
		if err := e.Force(BF16); err != nil || e.Precision() != BF16 || PrecisionOf(e) != BF16 {
			t.Fatalf("Force(bf16): %v; Precision() = %v", err, e.Precision())
		}
	})
	same, worst := true, 0.0
	for i := range forced {
		same = same && forced[i] == fp32[i]
		worst = max(worst, math.Abs(float64(forced[i]-fp32[i])))
	}
	if same || worst > BF16MaxProbDiff {
		t.Fatalf("forced bf16 against fp32: identical %v, largest difference %v (want different, within %v)", same, worst, BF16MaxProbDiff)
	}
	if two := run(2, func(e *Engine) { _ = e.Force(BF16) }); !slices.Equal(two, forced) {
		t.Fatal("forced bf16 differs between 1 and 2 threads")
	}
	if back := run(1, func(e *Engine) {
		_ = e.Force(BF16)
		if err := e.Force(FP32); err != nil || e.Precision() != FP32 {
			t.Fatalf("Force(fp32) after bf16: %v", err)
		}
	}); !slices.Equal(back, fp32) {
		t.Fatal("Force(fp32) after Force(bf16) differs from fp32")
	}
	if err := run1Err(ck); err == nil {
		t.Fatal("Force accepted an unknown precision")
	}
	if !sgemm.BF16Native() {
		return
	}
	checked := run(1, func(e *Engine) {
		if got, par, err := e.SetPrecision(BF16, batch); err != nil || got != BF16 {
			t.Fatalf("SetPrecision(bf16) = %v (%v), %v", got, par, err)
		}
	})
	if !slices.Equal(checked, forced) {
		t.Fatal("forced bf16 differs from bf16 after its parity check")
	}
}

// run1Err forces an unknown precision on a fresh engine.
func run1Err(ck *model.Checkpoint) error {
	e, err := New(ck, 1, 1)
	if err != nil {
		return err
	}
	defer e.Close()
	return e.Force("fp8")
}
