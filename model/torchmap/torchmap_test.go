package torchmap

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/model/safetensors"
	"rgcpred/rgc"
)

// randomCheckpoint returns a checkpoint of the named configuration whose
// every tensor (norms and running statistics included) is random, so a
// mixed-up or untransposed tensor changes the model's output.
func randomCheckpoint(t testing.TB, name string, cells int, seed uint64) *model.Checkpoint {
	t.Helper()
	cfg, err := model.ParseConfigName(name, cells)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	w := model.InitWeights(cfg, rng)
	for _, p := range cfg.Params() {
		v := w.Tensors[p.Name]
		switch {
		case strings.HasSuffix(p.Name, ".running_var"):
			for i := range v {
				v[i] = 0.5 + rng.Float32()
			}
		case p.Kind != model.KindWeight:
			for i := range v {
				v[i] += 0.1 * float32(rng.NormFloat64())
			}
		}
	}
	ids := make([]int, cells)
	for i := range ids {
		ids[i] = 100 + 3*i
	}
	return &model.Checkpoint{
		Weights: w, CellIDs: ids, BinRateHz: rgc.BinRateHz, WindowBins: cfg.InBins, Horizon: cfg.Classes - 1,
		Provenance: model.Provenance{Data: "synthetic", Steps: 7, ValNLL: 1.0 / 3, TrainedAt: "2026-01-02T03:04:05Z", Notes: "test"},
	}
}

func roundTrip(t testing.TB, f *safetensors.File) *safetensors.File {
	t.Helper()
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g, err := safetensors.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestExportImportBitExact(t *testing.T) {
	cks := map[string]*model.Checkpoint{
		"gpt-a-cat-cpu":    randomCheckpoint(t, "gpt-a-cat-cpu", 5, 1),
		"gpt-b-logmix-cpu": randomCheckpoint(t, "gpt-b-logmix-cpu", 3, 2),
	}
	if ck, err := model.LoadCheckpoint("../../models/gpt-a-cat-cpu.ckpt"); err == nil {
		cks["shipped"] = ck
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for name, ck := range cks {
		t.Run(name, func(t *testing.T) {
			f, err := Export(ck)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Import(roundTrip(t, f), Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := *ck
			want.TrainState = nil
			if !got.Equal(&want) {
				t.Fatal("export -> import changed the checkpoint")
			}
		})
	}
}

// TestTorchLayout checks names and layouts against SpikeModel's state_dict
// (torchref.py): nn.Linear weights are [out, in], MultiheadAttention fuses
// q, k, v into in_proj_weight [3d, d], Sequential children are numbered.
func TestTorchLayout(t *testing.T) {
	ck := randomCheckpoint(t, "gpt-b-cat-cpu", 4, 3)
	cfg := ck.Weights.Config
	d := cfg.Width()
	f, err := Export(ck)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ours, torch string
		torchShape  []int
		transposed  bool
	}{
		{"cnn.conv1.weight", "cnn.conv1.weight", []int{cfg.StemCh, 5, cfg.StemKernel}, false},
		{"cnn.bn2.running_var", "cnn.bn2.running_var", []int{cfg.StemCh}, false},
		{"cnn.blocks.0.conv2.weight", "cnn.blocks.0.c2.weight", []int{cfg.BlockMid, cfg.BlockMid, cfg.BlockKernel}, false},
		{"cnn.blocks.2.bn3.bias", "cnn.blocks.2.b3.bias", []int{cfg.BlockOut}, false},
		{"cnn.blocks.1.se.fc1.weight", "cnn.blocks.1.se.fc1.weight", []int{cfg.BlockOut / 4, cfg.BlockOut}, true},
		{"cnn.blocks.0.shortcut.conv.weight", "cnn.blocks.0.short.0.weight", []int{cfg.BlockOut, cfg.StemCh, 1}, false},
		{"cnn.blocks.0.shortcut.bn.running_mean", "cnn.blocks.0.short.1.running_mean", []int{cfg.BlockOut}, false},
		{"gpt.proj.weight", "proj.weight", []int{d, cfg.BlockOut}, true},
		{"gpt.cell_emb", "cell.weight", []int{4, d}, false},
		{"gpt.pos_emb", "pos", []int{64, d}, false},
		{"gpt.blocks.5.attn.qkv.weight", "blocks.5.attn.in_proj_weight", []int{3 * d, d}, true},
		{"gpt.blocks.5.attn.qkv.bias", "blocks.5.attn.in_proj_bias", []int{3 * d}, false},
		{"gpt.blocks.0.attn.proj.weight", "blocks.0.attn.out_proj.weight", []int{d, d}, true},
		{"gpt.blocks.1.mlp.fc.weight", "blocks.1.mlp.0.weight", []int{4 * d, d}, true},
		{"gpt.blocks.1.mlp.proj.bias", "blocks.1.mlp.2.bias", []int{d}, false},
		{"gpt.blocks.3.ln2.weight", "blocks.3.ln2.weight", []int{d}, false},
		{"gpt.ln_f.bias", "lnf.bias", []int{d}, false},
		{"head.weight", "head.weight", []int{81, d}, true},
	}
	for _, tc := range cases {
		tt := f.Tensor(tc.torch)
		if tt == nil {
			t.Errorf("%s: no tensor %s", tc.ours, tc.torch)
			continue
		}
		if !slices.Equal(tt.Shape, tc.torchShape) {
			t.Errorf("%s: shape %v, want %v", tc.torch, tt.Shape, tc.torchShape)
			continue
		}
		got, _ := tt.Float32s()
		ours := ck.Weights.Tensors[tc.ours]
		if !tc.transposed {
			if !slices.Equal(got, ours) {
				t.Errorf("%s differs from %s", tc.torch, tc.ours)
			}
			continue
		}
		out, in := tc.torchShape[0], tc.torchShape[1]
		for o := 0; o < out; o++ {
			for i := 0; i < in; i++ {
				if got[o*in+i] != ours[i*out+o] {
					t.Fatalf("%s[%d, %d] = %v, want ours[%d, %d] = %v", tc.torch, o, i, got[o*in+i], i, o, ours[i*out+o])
				}
			}
		}
	}
	// Buffers load_state_dict(strict=True) expects.
	if nb := f.Tensor("cnn.blocks.3.b1.num_batches_tracked"); nb == nil || nb.DType != safetensors.I64 || len(nb.Shape) != 0 {
		t.Errorf("num_batches_tracked: %+v", nb)
	}
	if m := f.Tensor(MaskName); m == nil || !slices.Equal(m.Shape, []int{64, 64}) {
		t.Errorf("mask: %+v", m)
	}
}

// pytorchStyle returns the state_dict of ck as PyTorch would write it: no
// rgcpred metadata and a different tensor order.
func pytorchStyle(t testing.TB, ck *model.Checkpoint) *safetensors.File {
	t.Helper()
	f, err := Export(ck)
	if err != nil {
		t.Fatal(err)
	}
	f.Metadata = map[string]string{"format": "pt"}
	slices.Reverse(f.Tensors)
	return roundTrip(t, f)
}

// TestImportPyTorchFileServes imports a metadata-free state_dict and checks
// that an engine serving it predicts exactly what the original does.
func TestImportPyTorchFileServes(t *testing.T) {
	for _, name := range []string{"gpt-a-cat-cpu", "gpt-b-logmix-cpu"} {
		t.Run(name, func(t *testing.T) {
			ck := randomCheckpoint(t, name, 3, 4)
			got, err := Import(pytorchStyle(t, ck), Options{CellIDs: ck.CellIDs})
			if err != nil {
				t.Fatal(err)
			}
			if got.Weights.Config != ck.Weights.Config {
				t.Fatalf("inferred config %+v, want %+v", got.Weights.Config, ck.Weights.Config)
			}
			if !strings.Contains(got.Provenance.Notes, "PyTorch") {
				t.Errorf("provenance %+v does not say where the weights came from", got.Provenance)
			}
			path := t.TempDir() + "/imported.ckpt"
			if err := got.Save(path); err != nil {
				t.Fatal(err)
			}
			loaded, err := model.LoadCheckpoint(path)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(9, 9))
			b := rgc.Batch{Inputs: make([]float32, 2*rgc.WindowLen), Cells: []int{ck.CellIDs[0], ck.CellIDs[2]}, Ends: []int{0, 0}}
			for i := range b.Inputs {
				if i%rgc.WindowBins < 600 {
					b.Inputs[i] = rng.Float32()
				}
			}
			want := predict(t, ck, &b)
			have := predict(t, loaded, &b)
			if !slices.Equal(want, have) {
				t.Fatal("the imported checkpoint predicts differently")
			}
		})
	}
}

func predict(t *testing.T, ck *model.Checkpoint, b *rgc.Batch) []float32 {
	t.Helper()
	e, err := engine.New(ck, b.Len(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	out := make([]float32, b.Len()*rgc.NumClasses)
	if err := e.Predict(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportErrors(t *testing.T) {
	ck := randomCheckpoint(t, "gpt-a-cat-cpu", 2, 5)
	ids := Options{CellIDs: ck.CellIDs}
	edit := func(fn func(f *safetensors.File)) *safetensors.File {
		f := pytorchStyle(t, ck)
		fn(f)
		return f
	}
	drop := func(name string) func(f *safetensors.File) {
		return func(f *safetensors.File) {
			f.Tensors = slices.DeleteFunc(f.Tensors, func(x safetensors.Tensor) bool { return x.Name == name })
		}
	}
	cases := []struct {
		name string
		f    *safetensors.File
		opt  Options
		want string
	}{
		{"no cell ids", pytorchStyle(t, ck), Options{}, "cluster id of each of the 2"},
		{"wrong cell count", pytorchStyle(t, ck), Options{CellIDs: []int{1}}, "1 cell ids for 2"},
		{"missing tensor", edit(drop("blocks.1.ln2.bias")), ids, "missing, e.g. blocks.1.ln2.bias"},
		{"not a SpikeModel", edit(drop("cnn.conv1.weight")), ids, "no tensor cnn.conv1.weight"},
		{"extra tensor", edit(func(f *safetensors.File) {
			f.Tensors = append(f.Tensors, safetensors.FromFloat32("blocks.0.attn.bias_k", []int{1}, []float32{0}))
		}), ids, "not parameters of gpt-a-cat-cpu: blocks.0.attn.bias_k"},
		{"untransposed", edit(func(f *safetensors.File) { f.Tensor("blocks.0.mlp.0.weight").Shape = []int{64, 256} }), ids, "shape [64 256]"},
		{"bad mask", edit(func(f *safetensors.File) {
			m := f.Tensor(MaskName)
			m.Data = make([]byte, len(m.Data))
		}), ids, "not the causal mask"},
		{"heads", pytorchStyle(t, ck), Options{CellIDs: ck.CellIDs, Heads: 3}, "not divisible into 3 heads"},
		{"odd stem", pytorchStyle(t, ck), Options{CellIDs: ck.CellIDs, Heads: 2}, "not a gpt-a"},
		{"non-finite", edit(func(f *safetensors.File) {
			copy(f.Tensor("lnf.weight").Data, []byte{0, 0, 0xc0, 0x7f})
		}), ids, "lnf.weight"},
		{"int weights", edit(func(f *safetensors.File) {
			*f.Tensor("lnf.bias") = safetensors.FromInt64("lnf.bias", []int{64}, make([]int64, 64))
		}), ids, "want a float type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(tc.f, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestImportConverts reads F64 and BF16 tensors (other writers' dtypes) as
// float32.
func TestImportConverts(t *testing.T) {
	ck := randomCheckpoint(t, "gpt-a-cat-cpu", 2, 6)
	f := pytorchStyle(t, ck)
	v, _ := f.Tensor("head.bias").Float32s()
	d := make([]byte, 8*len(v))
	for i, x := range v {
		bits := math.Float64bits(float64(x))
		for k := 0; k < 8; k++ {
			d[8*i+k] = byte(bits >> (8 * k))
		}
	}
	*f.Tensor("head.bias") = safetensors.Tensor{Name: "head.bias", DType: safetensors.F64, Shape: []int{len(v)}, Data: d}
	got, err := Import(f, Options{CellIDs: ck.CellIDs})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Weights.Tensors["head.bias"], ck.Weights.Tensors["head.bias"]) {
		t.Fatal("F64 head.bias did not convert exactly")
	}
}

// TestProbe checks the probe windows on the shipped recording and model:
// probabilities are the softmax of the logits and sum to 1.
func TestProbe(t *testing.T) {
	ck, err := model.LoadCheckpoint("../../models/gpt-a-cat-cpu.ckpt")
	if err != nil {
		t.Skipf("no shipped model: %v", err)
	}
	rec, err := rgc.Load("../../data/chicken-17-08-21")
	if err != nil {
		t.Skipf("no shipped recording: %v", err)
	}
	const n = 3
	f, err := Probe(ck, rec, n)
	if err != nil {
		t.Fatal(err)
	}
	f = roundTrip(t, f)
	logits, _ := f.Tensor(ProbeLogits).Float32s()
	prob, _ := f.Tensor(ProbeProb).Float32s()
	in, _ := f.Tensor(ProbeInput).Float32s()
	if len(in) != n*rgc.WindowLen {
		t.Fatalf("%d input values", len(in))
	}
	rows, _ := f.Tensor(ProbeCellRow).Int64s()
	ids, _ := f.Tensor(ProbeClusterID).Int64s()
	for i := 0; i < n; i++ {
		if ck.CellIDs[rows[i]] != int(ids[i]) {
			t.Errorf("window %d: row %d is cluster %d, file says %d", i, rows[i], ck.CellIDs[rows[i]], ids[i])
		}
		l := logits[i*81 : (i+1)*81]
		mx := slices.Max(l)
		var z float64
		for _, x := range l {
			z += math.Exp(float64(x - mx))
		}
		var sum float64
		for k, p := range prob[i*81 : (i+1)*81] {
			sum += float64(p)
			if want := math.Exp(float64(l[k]-mx)) / z; math.Abs(float64(p)-want) > 1e-5 {
				t.Fatalf("window %d class %d: prob %v, softmax of logits %v", i, k, p, want)
			}
		}
		if math.Abs(sum-1) > 1e-4 {
			t.Errorf("window %d: probabilities sum to %v", i, sum)
		}
	}
}

// TestImportStimMode checks the stimulus mode through export and import:
// it round-trips in the metadata, a file without it (PyTorch's, from the
// reference pipeline) is zero-phase, an unknown one is refused, and
// importing for input of the other mode is an error naming both.
func TestImportStimMode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   rgc.StimMode // the exported checkpoint's
		drop   bool         // remove the mode from the metadata
		input  *rgc.StimMode
		want   rgc.StimMode
		errHas []string
	}{
		{name: "causal", mode: rgc.StimCausal, want: rgc.StimCausal},
		{name: "zero-phase", mode: rgc.StimZeroPhase, want: rgc.StimZeroPhase},
		{name: "no metadata", mode: rgc.StimCausal, drop: true, want: rgc.StimZeroPhase},
		{name: "causal for causal", mode: rgc.StimCausal, input: ptr(rgc.StimCausal), want: rgc.StimCausal},
		{name: "zero-phase for causal", mode: rgc.StimZeroPhase, input: ptr(rgc.StimCausal), errHas: []string{"trained on zero-phase", "input is causal"}},
		{name: "causal for zero-phase", mode: rgc.StimCausal, input: ptr(rgc.StimZeroPhase), errHas: []string{"trained on causal", "input is zero-phase"}},
		{name: "no metadata for causal", mode: rgc.StimCausal, drop: true, input: ptr(rgc.StimCausal), errHas: []string{"trained on zero-phase", "input is causal"}},
	} {
		ck := randomCheckpoint(t, "gpt-a-cat-cpu", 2, 7)
		ck.StimMode = tc.mode
		f, err := Export(ck)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Metadata[MetaStimMode]; got != tc.mode.String() {
			t.Fatalf("%s: exported %s = %q", tc.name, MetaStimMode, got)
		}
		if tc.drop {
			delete(f.Metadata, MetaStimMode)
		}
		got, err := Import(roundTrip(t, f), Options{Input: tc.input})
		if tc.errHas != nil {
			for _, s := range tc.errHas {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("%s: %v, want an error with %q", tc.name, err, s)
				}
			}
			continue
		}
		if err != nil || got.StimMode != tc.want {
			t.Errorf("%s: imported mode %v (err %v), want %v", tc.name, got.StimMode, err, tc.want)
		}
	}
	f, err := Export(randomCheckpoint(t, "gpt-a-cat-cpu", 2, 7))
	if err != nil {
		t.Fatal(err)
	}
	f.Metadata[MetaStimMode] = "lookahead"
	if _, err := Import(f, Options{}); err == nil || !strings.Contains(err.Error(), MetaStimMode) {
		t.Errorf("unknown mode in the metadata: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
