package model

import "fmt"

// Numerical constants of the model (docs/model.md section 2), shared by the
// training graph (model/graph), the inference engine (model/engine) and the
// float64 reference (model/ref), so the three compute the same function.
const (
	// BNEps is batch norm's variance epsilon and BNMomentum the weight of
	// a training batch's statistics in the running statistics (PyTorch's
	// defaults, which the paper's code used).
	BNEps      = 1e-5
	BNMomentum = 0.1
	// LNEps is layer norm's variance epsilon (GPT-2).
	LNEps = 1e-5
	// GELUCubic is the cubic coefficient of GELU's tanh approximation,
	// 0.5 x (1 + tanh(sqrt(2/pi) (x + GELUCubic x^3))) (Hendrycks & Gimpel,
	// 2016), as GPT-2 uses it.
	GELUCubic = 0.044715
)

// Layer names one layer's tensors in Weights, without the tensor suffix:
// "cnn.conv1", "cnn.blocks.2.se.fc1", "gpt.blocks.0.attn.qkv", "head". Its
// methods give the names of the tensors, so code that walks the model
// (Config.Params, the training graph, the reference) spells each name once.
type Layer string

// Layers that occur once in the model.
const (
	LayerConv1 Layer = "cnn.conv1" // stem convolution 1 (stride 2)
	LayerBN1   Layer = "cnn.bn1"
	LayerConv2 Layer = "cnn.conv2" // stem convolution 2
	LayerBN2   Layer = "cnn.bn2"
	LayerProj  Layer = "gpt.proj" // encoder features -> transformer width (HasProj)
	LayerLNF   Layer = "gpt.ln_f" // final layer norm
	LayerHead  Layer = "head"     // linear head on the last token
)

// Embedding tensors: one row per cell and one per token position.
const (
	ParamCellEmb = "gpt.cell_emb"
	ParamPosEmb  = "gpt.pos_emb"
)

// CNNBlock returns the prefix of bottleneck block i, "cnn.blocks.i".
func CNNBlock(i int) Layer { return Layer(fmt.Sprintf("cnn.blocks.%d", i)) }

// GPTBlock returns the prefix of transformer block i, "gpt.blocks.i".
func GPTBlock(i int) Layer { return Layer(fmt.Sprintf("gpt.blocks.%d", i)) }

// Sub returns the sub-layer called name: CNNBlock(0).Sub("se.fc1") is
// "cnn.blocks.0.se.fc1".
func (l Layer) Sub(name string) Layer { return l + "." + Layer(name) }

// Weight is the name of the layer's weight (kernel, matrix or norm scale).
func (l Layer) Weight() string { return string(l) + ".weight" }

// Bias is the name of the layer's bias (or norm shift).
func (l Layer) Bias() string { return string(l) + ".bias" }

// RunningMean is the name of a batch norm's running mean.
func (l Layer) RunningMean() string { return string(l) + ".running_mean" }

// RunningVar is the name of a batch norm's running variance.
func (l Layer) RunningVar() string { return string(l) + ".running_var" }
