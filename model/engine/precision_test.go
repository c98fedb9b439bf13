package engine

import (
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"rgcpred/base/sgemm"
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

// TestParityRealWindows: on real windows of the shipped recording and the
// shipped checkpoints, the bf16 and int8 paths keep every probability and
// every value of the cumulative distribution within MaxProbDiff of the
// float32 path, and so the median class on every window whose median is
// decided by more than that; medians that do move go to a neighbouring
// class. On 1 and 2 threads, whose outputs are bit-identical (as
// float32's are).
func TestParityRealWindows(t *testing.T) {
	const windows = 512
	for _, prec := range []Precision{BF16, INT8} {
		t.Run(string(prec), func(t *testing.T) {
			if !Native(prec) {
				t.Skipf("%s kernels not native here (CPU features, or the purego build): the engine does not serve it", prec)
			}
			parityRealWindows(t, prec, windows)
		})
	}
}

func parityRealWindows(t *testing.T, prec Precision, windows int) {
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu", "gpt-b-cat-cpu"} {
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
			par, err := e.Compare(prec, batch)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s threads %d batch %d: %v", name, tc.threads, tc.maxBatch, par)
			if !par.OK() {
				t.Errorf("%s threads %d batch %d: %s parity fails: %v", name, tc.threads, tc.maxBatch, prec, par)
			}
			got, _, err := e.SetPrecision(prec, probe)
			if err != nil || got != prec || e.Precision() != prec {
				t.Fatalf("%s: SetPrecision(%s) = %v, %v; Precision() = %v", name, prec, got, err, e.Precision())
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
			m32, mp := model.Median(p32), model.Median(outs[0][i*rgc.NumClasses:(i+1)*rgc.NumClasses])
			var cdf float64
			for k, p := range p32[:max(m32, mp)] {
				cdf += float64(p)
				if k >= min(m32, mp) && math.Abs(cdf-0.5) > MaxProbDiff {
					t.Errorf("%s window %d: median class %d on %s, %d on float32, whose CDF at class %d is %.4f", name, i, mp, prec, m32, k, cdf)
				}
			}
		}
		for i := 1; i < len(outs); i++ {
			for j := range outs[0] {
				if math.Float32bits(outs[i][j]) != math.Float32bits(outs[0][j]) {
					t.Fatalf("%s: %s output %d differs between thread/batch settings: %v vs %v", name, prec, j, outs[i][j], outs[0][j])
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
	defer func(tol float64) { parityTol = tol }(parityTol)
	parityTol = 0
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
	}{{"fp32", FP32, true}, {"bf16", BF16, true}, {"int8", INT8, true}, {"", "", false}, {"BF16", "", false}, {"fp16", "", false}} {
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
		{Parity{Windows: 10, MaxProbDiff: MaxProbDiff}, true},
		{Parity{Windows: 10, MaxProbDiff: 2 * MaxProbDiff}, false},
		{Parity{Windows: 10, MedianMismatches: 1, Close: 1}, true},
		{Parity{Windows: 10, MedianMismatches: 1, DecidedMismatches: 1}, false},
		{Parity{Windows: 10, MaxCDFDiff: 2 * MaxProbDiff}, false},
		{Parity{Windows: 10, MaxProbDiff: math.Inf(1)}, false},
		{Parity{}, false},
	} {
		if got := tc.p.OK(); got != tc.want {
			t.Errorf("%v: OK() = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// TestForce: on any CPU (the portable kernels where the instructions are
// missing) Force runs the bf16 and int8 paths: outputs within the parity
// tolerance of float32 but not equal to them (int8's not equal to bf16's
// either), the same bits on 1 and 2 threads, and where the CPU runs the
// path natively the same bits as an engine that passed SetPrecision.
func TestForce(t *testing.T) {
	var bf16 []float32
	for _, tc := range []struct {
		prec Precision
		name string
	}{{BF16, "gpt-a-cat"}, {INT8, "gpt-a-cat"}} {
		ck := loadShipped(t, tc.name)
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
			if err := e.Force(tc.prec); err != nil || e.Precision() != tc.prec || PrecisionOf(e) != tc.prec {
				t.Fatalf("Force(%s): %v; Precision() = %v", tc.prec, err, e.Precision())
			}
		})
		same, worst := true, 0.0
		for i := range forced {
			same = same && forced[i] == fp32[i]
			worst = max(worst, math.Abs(float64(forced[i]-fp32[i])))
		}
		if same || worst > MaxProbDiff {
			t.Fatalf("forced %s against fp32: identical %v, largest difference %v (want different, within %v)", tc.prec, same, worst, MaxProbDiff)
		}
		if tc.prec == BF16 {
			bf16 = forced
		} else if slices.Equal(forced, bf16) {
			t.Fatalf("forced %s gives bf16's outputs bit for bit: its path is not running", tc.prec)
		}
		if two := run(2, func(e *Engine) { _ = e.Force(tc.prec) }); !slices.Equal(two, forced) {
			t.Fatalf("forced %s differs between 1 and 2 threads", tc.prec)
		}
		if back := run(1, func(e *Engine) {
			_ = e.Force(tc.prec)
			if err := e.Force(FP32); err != nil || e.Precision() != FP32 {
				t.Fatalf("Force(fp32) after %s: %v", tc.prec, err)
			}
		}); !slices.Equal(back, fp32) {
			t.Fatalf("Force(fp32) after Force(%s) differs from fp32", tc.prec)
		}
		if err := run1Err(ck); err == nil {
			t.Fatal("Force accepted an unknown precision")
		}
		if !Native(tc.prec) {
			continue
		}
		checked := run(1, func(e *Engine) {
			if got, par, err := e.SetPrecision(tc.prec, batch); err != nil || got != tc.prec {
				t.Fatalf("SetPrecision(%s) = %v (%v), %v", tc.prec, got, par, err)
			}
		})
		if !slices.Equal(checked, forced) {
			t.Fatalf("forced %s differs from %s after its parity check", tc.prec, tc.prec)
		}
	}
}

// TestSetPrecisionInt8: int8 takes effect on the paper CNN where the CPU
// has the instructions; where its parity check fails it falls back to
// bf16 (reporting int8's check), and to float32 where bf16's fails too;
// the cpu preset runs its transformer in int8 and its CNN, too narrow to
// gain, in bf16.
func TestSetPrecisionInt8(t *testing.T) {
	if !Native(INT8) {
		t.Skip("int8 not native here (no AVX512_VNNI or AVX512_BF16, or the purego build)")
	}
	ck := loadShipped(t, "gpt-a-cat")
	batch := realWindows(t, ck, 16)
	e, err := New(ck, 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, par, err := e.SetPrecision(INT8, batch)
	if err != nil || got != INT8 || e.Precision() != INT8 || !par.OK() {
		t.Fatalf("SetPrecision(int8) = %v (%v), %v; Precision() = %v", got, par, err, e.Precision())
	}
	out := make([]float32, 16*rgc.NumClasses)
	if allocs := testing.AllocsPerRun(5, func() { _ = e.Predict(batch, out) }); allocs != 0 {
		t.Errorf("int8 Predict: %v allocations per call, want 0", allocs)
	}
	// A tolerance bf16 meets and int8 does not: int8's error on these
	// windows is larger than bf16's.
	p16, err := e.Compare(BF16, batch)
	if err != nil {
		t.Fatal(err)
	}
	p8, err := e.Compare(INT8, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !(p8.MaxProbDiff > p16.MaxProbDiff && p8.MaxCDFDiff > p16.MaxCDFDiff) {
		t.Fatalf("int8's error (%v) not above bf16's (%v) on these windows: the fallback below is not exercised", p8, p16)
	}
	defer func(tol float64) { parityTol = tol }(parityTol)
	parityTol = max(p16.MaxProbDiff, p16.MaxCDFDiff)
	got, par, err = e.SetPrecision(INT8, batch)
	if err != nil || got != BF16 || e.Precision() != BF16 || par.OK() || par.MaxProbDiff != p8.MaxProbDiff {
		t.Fatalf("int8 failing its check: SetPrecision(int8) = %v (%v), %v; Precision() = %v; want bf16 and int8's failed check", got, par, err, e.Precision())
	}
	parityTol = 0
	got, par, err = e.SetPrecision(INT8, batch)
	if err != nil || got != FP32 || e.Precision() != FP32 || par.OK() {
		t.Fatalf("both checks failing: SetPrecision(int8) = %v (%v), %v; want fp32", got, par, err)
	}
	parityTol = MaxProbDiff

	cpu := loadShipped(t, "gpt-a-cat-cpu")
	ec, err := New(cpu, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	got, par, err = ec.SetPrecision(INT8, realWindows(t, cpu, 4))
	if err != nil || got != INT8 || ec.Precision() != INT8 || !par.OK() {
		t.Fatalf("cpu preset: SetPrecision(int8) = %v (%v), %v; want int8", got, par, err)
	}
	for i, b := range ec.net.blocks {
		if b.conv1.w8 != nil || b.conv2.taps != nil || b.conv2.w16 == nil {
			t.Errorf("cpu preset block %d: not on bf16 under int8", i)
		}
	}
	if l := ec.net.layers[0]; l.qkv.w8 == nil || l.fc.w8 == nil || ec.net.head.w8 != nil {
		t.Error("cpu preset: the transformer's linear layers not on int8 (or the head on it)")
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
