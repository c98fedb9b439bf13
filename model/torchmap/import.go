package torchmap

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"rgcpred/model"
	"rgcpred/model/safetensors"
	"rgcpred/rgc"
)

// Options supplies what a safetensors file written by PyTorch does not
// carry. Fields left zero are taken from the file's rgcpred metadata when
// present (files written by Export), else from the defaults below.
type Options struct {
	// CellIDs maps embedding rows to the recording's cluster ids; required
	// unless the file's metadata holds them. It overrides the metadata.
	CellIDs []int
	// Heads is the number of attention heads (the tensors do not determine
	// it); 0 means the metadata's configuration, else 4 (torchref.py).
	Heads int
	// BinRateHz is the bin rate the weights were trained at; 0 means the
	// metadata's, else rgc.BinRateHz.
	BinRateHz float64
	// Provenance replaces the metadata's provenance when Data or Notes is set.
	Provenance model.Provenance
	// Input, if not nil, is the stimulus mode of the data the model is
	// imported for; the file's (its metadata's, else zero-phase, the
	// reference pipeline's) must equal it.
	Input *rgc.StimMode
}

// Import converts a safetensors file holding a SpikeModel state_dict into a
// validated checkpoint. The configuration comes from the metadata or, for
// files written by PyTorch, from the tensor shapes; every expected tensor
// must be present with its shape, float tensors are read as float32 (F32
// exactly), and any tensor that is not a SpikeModel parameter or buffer is
// an error. The mask and num_batches_tracked buffers are checked and
// dropped.
func Import(f *safetensors.File, opt Options) (*model.Checkpoint, error) {
	cfg, fromMeta, err := importConfig(f, opt)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	ck := &model.Checkpoint{
		Weights:    &model.Weights{Config: cfg, Tensors: make(map[string][]float32)},
		BinRateHz:  rgc.BinRateHz,
		WindowBins: cfg.InBins,
		Horizon:    cfg.Classes - 1,
		StimMode:   rgc.StimZeroPhase, // the reference pipeline's, unless the metadata says otherwise
	}
	if err := readMeta(f, ck, fromMeta); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if opt.Input != nil {
		if err := ck.CheckInput(*opt.Input); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
	}
	if opt.CellIDs != nil {
		ck.CellIDs = slices.Clone(opt.CellIDs)
	}
	if ck.CellIDs == nil {
		return nil, fmt.Errorf("import: the file has no %s metadata: give the cluster id of each of the %d embedding rows",
			MetaCellIDs, cfg.NumCells)
	}
	if opt.BinRateHz != 0 {
		ck.BinRateHz = opt.BinRateHz
	}
	if opt.Provenance.Data != "" || opt.Provenance.Notes != "" {
		ck.Provenance = opt.Provenance
	}

	used := make(map[string]bool)
	var missing []string
	for _, m := range mappings(cfg) {
		t := f.Tensor(m.torch)
		if t == nil {
			missing = append(missing, m.torch)
			continue
		}
		used[m.torch] = true
		want := m.shape
		if m.transpose {
			want = []int{m.shape[1], m.shape[0]}
		}
		if !slices.Equal(t.Shape, want) {
			return nil, fmt.Errorf("import: tensor %s has shape %v, %s wants %v (for our %s)", m.torch, t.Shape, cfg.Name(), want, m.ours)
		}
		v, err := t.Float32s()
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("import: tensor %s[%d] is %v", m.torch, i, x)
			}
		}
		if m.transpose {
			v = transpose(v, want[0], want[1])
		}
		ck.Weights.Tensors[m.ours] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("import: %d tensors of %s missing, e.g. %s (docs/interop.md lists the module names)",
			len(missing), cfg.Name(), strings.Join(missing[:min(5, len(missing))], ", "))
	}
	if err := checkBuffers(f, cfg, used); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if err := ck.Validate(); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	return ck, nil
}

// checkBuffers accepts the mask and num_batches_tracked buffers and rejects
// every other tensor not in used.
func checkBuffers(f *safetensors.File, cfg model.Config, used map[string]bool) error {
	bn := make(map[string]bool)
	for _, p := range batchNormPrefixes(cfg) {
		bn[p+BatchesTrackedSuffix] = true
	}
	var extra []string
	for i := range f.Tensors {
		t := &f.Tensors[i]
		switch {
		case used[t.Name]:
		case bn[t.Name]:
			if t.NumElements() != 1 {
				return fmt.Errorf("buffer %s has shape %v, want a scalar", t.Name, t.Shape)
			}
		case t.Name == MaskName:
			T := cfg.Tokens()
			if !slices.Equal(t.Shape, []int{T, T}) {
				return fmt.Errorf("buffer %s has shape %v, want [%d %d]", t.Name, t.Shape, T, T)
			}
			v, err := t.Float32s()
			if err != nil {
				return err
			}
			for k, x := range causalMask(T) {
				if math.Float32bits(v[k]) != math.Float32bits(x) && !(x == 0 && v[k] == 0) {
					return fmt.Errorf("buffer %s is not the causal mask (element [%d, %d] is %v)", t.Name, k/T, k%T, v[k])
				}
			}
		default:
			extra = append(extra, t.Name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("%d tensors are not parameters of %s: %s (docs/interop.md lists the module names)",
			len(extra), cfg.Name(), strings.Join(extra[:min(5, len(extra))], ", "))
	}
	return nil
}

// readMeta fills the checkpoint's cell ids, time base, stimulus mode and
// provenance from the rgcpred metadata, when the file has it.
func readMeta(f *safetensors.File, ck *model.Checkpoint, fromMeta bool) error {
	md := f.Metadata
	if s, ok := md[MetaCellIDs]; ok {
		if err := json.Unmarshal([]byte(s), &ck.CellIDs); err != nil {
			return fmt.Errorf("metadata %s: %w", MetaCellIDs, err)
		}
		if ck.CellIDs == nil {
			ck.CellIDs = []int{}
		}
	}
	if s, ok := md[MetaBinRateHz]; ok {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("metadata %s: %w", MetaBinRateHz, err)
		}
		ck.BinRateHz = v
	}
	if s, ok := md[MetaStimMode]; ok {
		m, err := rgc.ParseStimMode(s)
		if err != nil {
			return fmt.Errorf("metadata %s: %w", MetaStimMode, err)
		}
		ck.StimMode = m
	}
	for key, dst := range map[string]*int{MetaWindowBins: &ck.WindowBins, MetaHorizon: &ck.Horizon} {
		if s, ok := md[key]; ok {
			v, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("metadata %s: %w", key, err)
			}
			*dst = v
		}
	}
	if s, ok := md[MetaProvenance]; ok {
		if err := json.Unmarshal([]byte(s), &ck.Provenance); err != nil {
			return fmt.Errorf("metadata %s: %w", MetaProvenance, err)
		}
	} else if !fromMeta {
		ck.Provenance.Notes = "imported from a PyTorch state_dict (safetensors)"
	}
	return nil
}

// importConfig returns the configuration from the metadata (reporting
// true) or inferred from the tensor shapes.
func importConfig(f *safetensors.File, opt Options) (model.Config, bool, error) {
	if s, ok := f.Metadata[MetaConfig]; ok {
		var c model.Config
		if err := json.Unmarshal([]byte(s), &c); err != nil {
			return c, true, fmt.Errorf("metadata %s: %w", MetaConfig, err)
		}
		if opt.Heads != 0 && opt.Heads != c.Heads {
			return c, true, fmt.Errorf("%d heads requested, the metadata's configuration has %d", opt.Heads, c.Heads)
		}
		if err := c.Validate(); err != nil {
			return c, true, fmt.Errorf("metadata %s: %w", MetaConfig, err)
		}
		return c, true, nil
	}
	c, err := InferConfig(f, opt.Heads)
	return c, false, err
}

// InferConfig derives the configuration of a SpikeModel state_dict from its
// tensor shapes; heads (0 for torchref.py's 4) is the one size the shapes
// do not fix. The result must be one of the gpt-a (2 layers, head width 16)
// or gpt-b (6 layers, head width 32) stems.
func InferConfig(f *safetensors.File, heads int) (model.Config, error) {
	if heads == 0 {
		heads = 4
	}
	shape := func(name string, rank int) ([]int, error) {
		t := f.Tensor(name)
		if t == nil {
			return nil, fmt.Errorf("no tensor %s: not a SpikeModel state_dict (docs/interop.md lists the module names)", name)
		}
		if len(t.Shape) != rank {
			return nil, fmt.Errorf("tensor %s has shape %v, want rank %d", name, t.Shape, rank)
		}
		return t.Shape, nil
	}
	var c model.Config
	s, err := shape("cnn.conv1.weight", 3)
	if err != nil {
		return c, err
	}
	c.StemCh, c.InRows, c.StemKernel = s[0], s[1], s[2]
	if s, err = shape("cnn.blocks.0.c2.weight", 3); err != nil {
		return c, err
	}
	c.BlockMid, c.BlockKernel = s[0], s[2]
	if s, err = shape("cnn.blocks.0.c3.weight", 3); err != nil {
		return c, err
	}
	c.BlockOut = s[0]
	if s, err = shape("cnn.blocks.0.se.fc1.weight", 2); err != nil {
		return c, err
	}
	if s[0] < 1 || c.BlockOut%s[0] != 0 {
		return c, fmt.Errorf("squeeze-excite width %d does not divide %d channels", s[0], c.BlockOut)
	}
	c.SEReduction = c.BlockOut / s[0]
	if s, err = shape("cell.weight", 2); err != nil {
		return c, err
	}
	c.NumCells = s[0]
	d := s[1]
	for f.Tensor("blocks."+strconv.Itoa(c.Layers)+".ln1.weight") != nil {
		c.Layers++
	}
	if heads < 1 || d%heads != 0 {
		return c, fmt.Errorf("model width %d is not divisible into %d heads", d, heads)
	}
	c.Heads, c.HeadDim = heads, d/heads
	if s, err = shape("head.weight", 2); err != nil {
		return c, err
	}
	c.InBins, c.Classes = rgc.WindowBins, rgc.NumClasses
	switch {
	case s[0] == c.Classes:
		c.Head = model.HeadCat
	case s[0]%3 == 0:
		c.Head, c.Mixtures = model.HeadLogMix, s[0]/3
	default:
		return c, fmt.Errorf("head has %d outputs: want %d (cat) or 3 x mixtures (logmix)", s[0], c.Classes)
	}
	if c.Head == model.HeadCat {
		c.Mixtures = 64
	}
	switch {
	case c.Layers == 2 && c.HeadDim == 16:
		c.Stem = model.StemGPTA
	case c.Layers == 6 && c.HeadDim == 32:
		c.Stem = model.StemGPTB
	default:
		return c, fmt.Errorf("%d transformer layers of %d heads x %d: not a gpt-a (2 x 4 x 16) or gpt-b (6 x 4 x 32) stem",
			c.Layers, c.Heads, c.HeadDim)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}
