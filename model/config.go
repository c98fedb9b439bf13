// Package model defines the spike-prediction network of docs/model.md
// section 2, head(gpt(cnn(input) + embed(cell))): one Config plus a set of
// named weights (Weights) that feeds the gorgonia training graph
// (model/graph), the inference engine (model/engine) and the float64
// reference (model/ref), with the numerical constants they share
// (consts.go) and the map from head outputs to class probabilities
// (Config.Probs).
package model

import (
	"fmt"
	"strings"

	"rgcpred/rgc"
)

// Stem names.
const (
	StemGPTA = "gpt-a"
	StemGPTB = "gpt-b"
)

// Head names.
const (
	HeadCat    = "cat"
	HeadLogMix = "logmix"
)

// CNN size presets.
const (
	// CNNPaper is the paper's encoder (~0.55 M parameters).
	CNNPaper = "paper"
	// CNNCPU is a narrower encoder for quick CPU experiments and tests.
	CNNCPU = "cpu"
)

// Fixed geometry of the encoder: four bottleneck blocks with these strides
// take the 512-bin output of conv2 to Tokens positions.
var blockStrides = [4]int{2, 2, 2, 1}

// Config is the whole architecture. Together with Weights it determines the
// model's output exactly.
type Config struct {
	Stem     string `json:"stem"`      // gpt-a | gpt-b
	Head     string `json:"head"`      // cat | logmix
	NumCells int    `json:"num_cells"` // rows of the cell embedding

	// CNN encoder (section 2, "CNN encoder").
	InRows      int `json:"in_rows"`      // rgc.InputRows: four LEDs + spike history
	InBins      int `json:"in_bins"`      // rgc.WindowBins
	StemCh      int `json:"stem_ch"`      // channels of conv1 and conv2 (16)
	StemKernel  int `json:"stem_kernel"`  // kernel length of conv1 and conv2 (21)
	BlockMid    int `json:"block_mid"`    // bottleneck inner channels (128)
	BlockOut    int `json:"block_out"`    // bottleneck output channels = token features (64)
	BlockKernel int `json:"block_kernel"` // middle kernel length of a block (7)
	SEReduction int `json:"se_reduction"` // squeeze-excite reduction ratio (4)

	// Transformer stem (section 2, "Transformer stem").
	Layers  int `json:"layers"`   // 2 (gpt-a) or 6 (gpt-b)
	Heads   int `json:"heads"`    // 4
	HeadDim int `json:"head_dim"` // 16 (gpt-a) or 32 (gpt-b)

	// Output.
	Mixtures int `json:"mixtures"` // logmix components (64)
	Classes  int `json:"classes"`  // rgc.NumClasses
}

// NewConfig returns the configuration for a stem, head and CNN preset.
func NewConfig(stem, head, cnn string, numCells int) (Config, error) {
	c := Config{
		Stem: stem, Head: head, NumCells: numCells,
		InRows: rgc.InputRows, InBins: rgc.WindowBins,
		StemKernel: 21, BlockKernel: 7, SEReduction: 4,
		Heads: 4, Mixtures: 64, Classes: rgc.NumClasses,
	}
	p, ok := cnnPresets[cnn]
	if !ok {
		return Config{}, fmt.Errorf("unknown CNN preset %q (want %s or %s)", cnn, CNNPaper, CNNCPU)
	}
	c.StemCh, c.BlockMid, c.BlockOut = p.stemCh, p.blockMid, p.blockOut
	switch stem {
	case StemGPTA:
		c.Layers, c.HeadDim = 2, 16
	case StemGPTB:
		c.Layers, c.HeadDim = 6, 32
	default:
		return Config{}, fmt.Errorf("unknown stem %q (want %s or %s)", stem, StemGPTA, StemGPTB)
	}
	return c, c.Validate()
}

// ParseConfigName parses "gpt-a-cat", "gpt-b-logmix", optionally with a CNN
// preset suffix ("gpt-a-cat-cpu"); the default preset is paper.
func ParseConfigName(name string, numCells int) (Config, error) {
	cnn := CNNPaper
	if s, ok := strings.CutSuffix(name, "-"+CNNCPU); ok {
		name, cnn = s, CNNCPU
	} else if s, ok := strings.CutSuffix(name, "-"+CNNPaper); ok {
		name = s
	}
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return Config{}, fmt.Errorf("config name %q: want STEM-HEAD[-cpu], e.g. gpt-a-cat", name)
	}
	return NewConfig(name[:i], name[i+1:], cnn, numCells)
}

// Name returns the configuration's short name, e.g. "gpt-a-cat" or
// "gpt-a-cat-cpu".
func (c Config) Name() string {
	n := c.Stem + "-" + c.Head
	if c.CNNPreset() == CNNCPU {
		n += "-" + CNNCPU
	}
	return n
}

// cnnSizes are the channel counts that set a CNN preset apart.
type cnnSizes struct{ stemCh, blockMid, blockOut int }

// cnnPresets maps each CNN preset to its sizes.
var cnnPresets = map[string]cnnSizes{
	CNNPaper: {16, 128, 64},
	CNNCPU:   {8, 32, 64},
}

// CNNPreset returns the name of the CNN preset whose sizes the
// configuration has (CNNPaper or CNNCPU), or "custom" for other sizes (an
// imported model).
func (c Config) CNNPreset() string {
	for name, p := range cnnPresets {
		if p == (cnnSizes{c.StemCh, c.BlockMid, c.BlockOut}) {
			return name
		}
	}
	return "custom"
}

// Width is the transformer's model width (Heads x HeadDim).
func (c Config) Width() int { return c.Heads * c.HeadDim }

// Tokens is the number of tokens the encoder produces (64 for a window of
// rgc.WindowBins bins).
func (c Config) Tokens() int {
	n := c.InBins / 2 // conv1 stride 2
	for _, s := range blockStrides {
		n /= s
	}
	return n
}

// HeadOut is the number of outputs of the head: Classes for cat, 3 x
// Mixtures (weights, means, log standard deviations) for logmix.
func (c Config) HeadOut() int {
	if c.Head == HeadLogMix {
		return 3 * c.Mixtures
	}
	return c.Classes
}

// HasProj reports whether a linear projection maps the encoder's features
// to the transformer width (gpt-b, or any encoder narrower or wider).
func (c Config) HasProj() bool { return c.BlockOut != c.Width() }

// BlockStride returns the stride of bottleneck block i (0..3).
func (c Config) BlockStride(i int) int { return blockStrides[i] }

// NumBlocks is the number of bottleneck blocks.
func (c Config) NumBlocks() int { return len(blockStrides) }

// BlockIn returns the input channels of bottleneck block i.
func (c Config) BlockIn(i int) int {
	if i == 0 {
		return c.StemCh
	}
	return c.BlockOut
}

// BlockHasShortcut reports whether block i has a 1x1 strided convolution +
// batch norm on its shortcut (when the shape changes).
func (c Config) BlockHasShortcut(i int) bool {
	return c.BlockIn(i) != c.BlockOut || c.BlockStride(i) != 1
}

// Validate checks the configuration for consistency.
func (c Config) Validate() error {
	switch {
	case c.Stem != StemGPTA && c.Stem != StemGPTB:
		return fmt.Errorf("config: unknown stem %q", c.Stem)
	case c.Head != HeadCat && c.Head != HeadLogMix:
		return fmt.Errorf("config: unknown head %q", c.Head)
	case c.NumCells < 1:
		return fmt.Errorf("config: num_cells %d < 1", c.NumCells)
	case c.InRows != rgc.InputRows || c.InBins != rgc.WindowBins || c.Classes != rgc.NumClasses:
		return fmt.Errorf("config: input %dx%d with %d classes, want %dx%d with %d",
			c.InRows, c.InBins, c.Classes, rgc.InputRows, rgc.WindowBins, rgc.NumClasses)
	case c.StemCh < 1 || c.BlockMid < 1 || c.BlockOut < 1 || c.StemKernel%2 != 1 || c.BlockKernel%2 != 1:
		return fmt.Errorf("config: bad CNN sizes (channels %d/%d/%d, kernels %d/%d must be odd)",
			c.StemCh, c.BlockMid, c.BlockOut, c.StemKernel, c.BlockKernel)
	case c.SEReduction < 1 || c.BlockOut%c.SEReduction != 0:
		return fmt.Errorf("config: se_reduction %d does not divide %d", c.SEReduction, c.BlockOut)
	case c.Layers < 1 || c.Heads < 1 || c.HeadDim < 1:
		return fmt.Errorf("config: bad transformer sizes (layers %d, heads %d, head_dim %d)", c.Layers, c.Heads, c.HeadDim)
	case c.Head == HeadLogMix && c.Mixtures < 1:
		return fmt.Errorf("config: logmix needs mixtures >= 1")
	}
	return nil
}

// Param kinds, for weight decay and initialisation.
const (
	KindWeight = "weight" // matrices and kernels: weight decay applies
	KindBias   = "bias"   // biases
	KindNorm   = "norm"   // batch-norm and layer-norm scales and shifts
	KindStat   = "stat"   // batch-norm running statistics (not trained)
	KindEmbed  = "embed"  // embeddings
)

// ParamSpec names one weight tensor of the model.
type ParamSpec struct {
	Name  string // e.g. "cnn.blocks.0.conv2.weight"
	Shape []int  // row-major
	Kind  string // one of the Kind constants
}

// Size is the number of elements of the tensor.
func (p ParamSpec) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Params lists every weight tensor of the model, in a fixed order.
//
// Layouts: convolution kernels are [out, in, k]; linear weights are
// [in, out] (y = x W + b); embeddings are [rows, width]. Batch norm has
// weight, bias, running_mean, running_var, each [channels]; layer norm has
// weight and bias, each [width]. Convolutions feeding batch norm have no bias.
func (c Config) Params() []ParamSpec {
	var ps []ParamSpec
	add := func(name, kind string, shape ...int) {
		ps = append(ps, ParamSpec{Name: name, Shape: shape, Kind: kind})
	}
	conv := func(l Layer, out, in, k int) { add(l.Weight(), KindWeight, out, in, k) }
	bn := func(l Layer, ch int) {
		add(l.Weight(), KindNorm, ch)
		add(l.Bias(), KindNorm, ch)
		add(l.RunningMean(), KindStat, ch)
		add(l.RunningVar(), KindStat, ch)
	}
	linear := func(l Layer, in, out int) {
		add(l.Weight(), KindWeight, in, out)
		add(l.Bias(), KindBias, out)
	}
	ln := func(l Layer, w int) {
		add(l.Weight(), KindNorm, w)
		add(l.Bias(), KindNorm, w)
	}

	// CNN encoder.
	conv(LayerConv1, c.StemCh, c.InRows, c.StemKernel)
	bn(LayerBN1, c.StemCh)
	conv(LayerConv2, c.StemCh, c.StemCh, c.StemKernel)
	bn(LayerBN2, c.StemCh)
	for i := 0; i < c.NumBlocks(); i++ {
		p := CNNBlock(i)
		in := c.BlockIn(i)
		conv(p.Sub("conv1"), c.BlockMid, in, 1)
		bn(p.Sub("bn1"), c.BlockMid)
		conv(p.Sub("conv2"), c.BlockMid, c.BlockMid, c.BlockKernel)
		bn(p.Sub("bn2"), c.BlockMid)
		conv(p.Sub("conv3"), c.BlockOut, c.BlockMid, 1)
		bn(p.Sub("bn3"), c.BlockOut)
		linear(p.Sub("se.fc1"), c.BlockOut, c.BlockOut/c.SEReduction)
		linear(p.Sub("se.fc2"), c.BlockOut/c.SEReduction, c.BlockOut)
		if c.BlockHasShortcut(i) {
			conv(p.Sub("shortcut.conv"), c.BlockOut, in, 1)
			bn(p.Sub("shortcut.bn"), c.BlockOut)
		}
	}

	// Transformer stem.
	d := c.Width()
	if c.HasProj() {
		linear(LayerProj, c.BlockOut, d)
	}
	add(ParamCellEmb, KindEmbed, c.NumCells, d)
	add(ParamPosEmb, KindEmbed, c.Tokens(), d)
	for i := 0; i < c.Layers; i++ {
		p := GPTBlock(i)
		ln(p.Sub("ln1"), d)
		linear(p.Sub("attn.qkv"), d, 3*d)
		linear(p.Sub("attn.proj"), d, d)
		ln(p.Sub("ln2"), d)
		linear(p.Sub("mlp.fc"), d, 4*d)
		linear(p.Sub("mlp.proj"), 4*d, d)
	}
	ln(LayerLNF, d)

	// Head on the last token.
	linear(LayerHead, d, c.HeadOut())
	return ps
}

// Param returns the spec of the tensor called name, and whether the
// configuration has one.
func (c Config) Param(name string) (ParamSpec, bool) {
	for _, p := range c.Params() {
		if p.Name == name {
			return p, true
		}
	}
	return ParamSpec{}, false
}

// CountParams returns the number of trainable parameters (batch-norm
// running statistics excluded) whose name starts with prefix ("" for all).
func (c Config) CountParams(prefix string) int {
	n := 0
	for _, p := range c.Params() {
		if p.Kind != KindStat && strings.HasPrefix(p.Name, prefix) {
			n += p.Size()
		}
	}
	return n
}
