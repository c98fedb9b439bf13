// Package ref is the reference forward pass of the spike-prediction model
// of docs/model.md section 2, head(gpt(cnn(input) + embed(cell))), written
// to be read: plain float64 loops, one function per layer, in the order the
// data flows through them.
//
// # Contract
//
// Given a model.Weights (a model.Config plus every tensor it names, in the
// layouts documented on model.Config.Params), Net.Forward returns the head
// outputs of one window and cell, and Net.Probs the 81 class probabilities.
// The inference engine (model/engine) and the training graph in inference
// mode (model/graph) must agree with it: their parity tests compare against
// this package with stated tolerances. As in the specification:
//   - everything in float64 from the float32 weights and inputs;
//   - layout [channels][positions] for the encoder, [tokens][features] for
//     the transformer;
//   - direct convolutions with "same" zero padding;
//   - batch norm with its running statistics (inference mode, model.BNEps),
//     applied after each convolution, not folded into it;
//   - layer norm with model.LNEps; GELU in its tanh form (model.GELUCubic);
//   - full causal attention for every token;
//   - nothing cached or reused between calls.
//
// It is slow (a few hundred milliseconds for a paper-size window, a
// hundred times the engine) and allocates freely; it exists to be
// obviously right, never to serve.
package ref

import (
	"fmt"
	"math"

	"rgcpred/model"
)

// Net is the reference model: a configuration and its weights, widened to
// float64 once.
type Net struct {
	cfg model.Config
	w   map[string][]float64
}

// New returns the reference model for w, which must pass w.Check.
func New(w *model.Weights) (*Net, error) {
	if w == nil {
		return nil, fmt.Errorf("ref: nil weights")
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("ref: %w", err)
	}
	n := &Net{cfg: w.Config, w: make(map[string][]float64, len(w.Tensors))}
	for name, t := range w.Tensors {
		v := make([]float64, len(t))
		for i, x := range t {
			v[i] = float64(x)
		}
		n.w[name] = v
	}
	return n, nil
}

// Config returns the model configuration.
func (n *Net) Config() model.Config { return n.cfg }

// Probs returns the class probabilities (Config.Classes values) of one
// window for the cell on embedding row cell: HeadProbs of Forward.
func (n *Net) Probs(window []float32, cell int) []float32 {
	return HeadProbs(n.cfg, n.Forward(window, cell))
}

// HeadProbs returns the class probabilities of head outputs out:
// model.Config.Probs of out rounded to float32, the precision in which
// every other implementation hands head outputs over.
func HeadProbs(c model.Config, out []float64) []float32 {
	o32 := make([]float32, len(out))
	for i, v := range out {
		o32[i] = float32(v)
	}
	p := make([]float32, c.Classes)
	c.Probs(o32, p)
	return p
}

// Forward returns the head outputs (Config.HeadOut values: 81 logits for
// the cat head; 64 mixture logits, 64 means and 64 log standard deviations
// for logmix) of one window, InRows x InBins values row-major (oldest bin
// first, rows 0-3 the LEDs, row 4 the spike history), for the cell on
// embedding row cell. Shapes in comments are for the paper's gpt-a.
func (n *Net) Forward(window []float32, cell int) []float64 {
	c := n.cfg
	if len(window) != c.InRows*c.InBins {
		panic(fmt.Sprintf("ref: window of %d values, want %d x %d", len(window), c.InRows, c.InBins))
	}
	if cell < 0 || cell >= c.NumCells {
		panic(fmt.Sprintf("ref: cell row %d outside 0..%d", cell, c.NumCells-1))
	}
	x := make([][]float64, c.InRows) // [5][1024]
	for r := range x {
		x[r] = make([]float64, c.InBins)
		for j := range x[r] {
			x[r][j] = float64(window[r*c.InBins+j])
		}
	}
	feat := n.cnn(x)        // [64 channels][64 positions]
	tok := transpose(feat)  // [64 tokens][64 features]
	tok = n.gpt(tok, cell)  // [64][d]
	last := tok[len(tok)-1] // the last token sees the whole window
	last = n.layerNorm(last, model.LayerLNF)
	return n.linear(last, model.LayerHead) // [HeadOut]
}

// ---------------------------------------------------------------------------
// CNN encoder (docs/model.md section 2.1): [5][1024] -> [64][64].

// cnn runs the two stem convolutions and the four bottleneck blocks.
func (n *Net) cnn(x [][]float64) [][]float64 {
	c := n.cfg
	x = relu(n.batchNorm(n.conv1d(x, model.LayerConv1, 2), model.LayerBN1)) // [16][512]
	x = relu(n.batchNorm(n.conv1d(x, model.LayerConv2, 1), model.LayerBN2)) // [16][512]
	for i := 0; i < c.NumBlocks(); i++ {
		x = n.bottleneck(x, i) // [64][256], [64][128], [64][64], [64][64]
	}
	return x
}

// bottleneck is block i, a ResNet bottleneck (He et al., 2016) with
// squeeze-and-excite on the residual branch (Hu et al., 2018):
// relu(se(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + shortcut(x)),
// conv2 carrying the block's stride, the shortcut a strided 1x1 convolution
// + batch norm when the shape changes and the identity otherwise.
func (n *Net) bottleneck(x [][]float64, i int) [][]float64 {
	p, s := model.CNNBlock(i), n.cfg.BlockStride(i)
	h := relu(n.batchNorm(n.conv1d(x, p.Sub("conv1"), 1), p.Sub("bn1"))) // [mid][l]
	h = relu(n.batchNorm(n.conv1d(h, p.Sub("conv2"), s), p.Sub("bn2")))  // [mid][l/s]
	h = n.batchNorm(n.conv1d(h, p.Sub("conv3"), 1), p.Sub("bn3"))        // [out][l/s]
	h = n.squeezeExcite(h, p.Sub("se"))
	sc := x
	if n.cfg.BlockHasShortcut(i) {
		sc = n.batchNorm(n.conv1d(x, p.Sub("shortcut.conv"), s), p.Sub("shortcut.bn"))
	}
	for ch := range h {
		for j := range h[ch] {
			h[ch][j] += sc[ch][j]
		}
	}
	return relu(h)
}

// squeezeExcite gates each channel of h [ch][l] by
// sigmoid(fc2(relu(fc1(mean of the channel over positions)))).
func (n *Net) squeezeExcite(h [][]float64, se model.Layer) [][]float64 {
	pooled := make([]float64, len(h)) // [ch]
	for ch := range h {
		for _, v := range h[ch] {
			pooled[ch] += v
		}
		pooled[ch] /= float64(len(h[ch]))
	}
	z := n.linear(pooled, se.Sub("fc1")) // [ch / reduction]
	for i := range z {
		z[i] = math.Max(z[i], 0)
	}
	gate := n.linear(z, se.Sub("fc2")) // [ch]
	for ch := range h {
		g := 1 / (1 + math.Exp(-gate[ch]))
		for j := range h[ch] {
			h[ch][j] *= g
		}
	}
	return h
}

// conv1d convolves x [cin][l] with the kernel [cout][cin][k] of layer l,
// with zero padding k/2 on both sides and stride s: output position o reads
// input positions o*s - k/2 .. o*s + k/2, giving [cout][l/s]. No bias: every
// convolution feeds a batch norm.
func (n *Net) conv1d(x [][]float64, l model.Layer, s int) [][]float64 {
	spec, ok := n.cfg.Param(l.Weight())
	if !ok {
		panic("ref: no convolution " + l.Weight())
	}
	w := n.w[l.Weight()]
	cout, cin, k := spec.Shape[0], spec.Shape[1], spec.Shape[2]
	lin := len(x[0])
	lout := (lin+2*(k/2)-k)/s + 1
	y := make([][]float64, cout)
	for o := range y {
		y[o] = make([]float64, lout)
		for pos := range y[o] {
			var sum float64
			for i := 0; i < cin; i++ {
				for t := 0; t < k; t++ {
					if j := pos*s - k/2 + t; j >= 0 && j < lin {
						sum += w[(o*cin+i)*k+t] * x[i][j]
					}
				}
			}
			y[o][pos] = sum
		}
	}
	return y
}

// batchNorm normalises each channel of x [ch][l] in place with layer bn's
// running statistics: (x - mean) / sqrt(var + eps) * weight + bias.
func (n *Net) batchNorm(x [][]float64, bn model.Layer) [][]float64 {
	g, b := n.w[bn.Weight()], n.w[bn.Bias()]
	m, v := n.w[bn.RunningMean()], n.w[bn.RunningVar()]
	for ch := range x {
		for j := range x[ch] {
			x[ch][j] = (x[ch][j]-m[ch])/math.Sqrt(v[ch]+model.BNEps)*g[ch] + b[ch]
		}
	}
	return x
}

// relu sets the negative entries of x to 0, in place.
func relu(x [][]float64) [][]float64 {
	for _, row := range x {
		for j, v := range row {
			row[j] = math.Max(v, 0)
		}
	}
	return x
}

// transpose turns the encoder output [channels][positions] into tokens
// [positions][channels]: token j is position j, feature f channel f.
func transpose(x [][]float64) [][]float64 {
	t := make([][]float64, len(x[0]))
	for j := range t {
		t[j] = make([]float64, len(x))
		for f := range x {
			t[j][f] = x[f][j]
		}
	}
	return t
}

// ---------------------------------------------------------------------------
// Transformer stem (docs/model.md section 2.2): GPT-2, pre-layer-norm.

// gpt projects the tokens [T][BlockOut] to the model width d when the
// configuration says so, adds the positional and cell embeddings, and runs
// the transformer blocks, returning the residual stream [T][d].
func (n *Net) gpt(tok [][]float64, cell int) [][]float64 {
	c := n.cfg
	if c.HasProj() {
		tok = n.linearRows(tok, model.LayerProj) // [T][d]
	}
	d := c.Width()
	pos, emb := n.w[model.ParamPosEmb], n.w[model.ParamCellEmb]
	for j := range tok {
		for f := 0; f < d; f++ {
			tok[j][f] += pos[j*d+f] + emb[cell*d+f]
		}
	}
	for l := 0; l < c.Layers; l++ {
		tok = n.block(tok, model.GPTBlock(l))
	}
	return tok
}

// block is one transformer block: x += attn(ln1(x)); x += mlp(ln2(x)).
func (n *Net) block(x [][]float64, p model.Layer) [][]float64 {
	a := n.attn(n.layerNormRows(x, p.Sub("ln1")), p.Sub("attn")) // [T][d]
	addRows(x, a)
	m := n.mlp(n.layerNormRows(x, p.Sub("ln2")), p.Sub("mlp")) // [T][d]
	addRows(x, m)
	return x
}

// attn is causal multi-head self-attention (Vaswani et al., 2017): qkv
// [T][3d] holds q, k, v side by side, head h in columns h*hd..(h+1)*hd of
// each; token i attends to tokens 0..i with weights softmax(q_i . k_j /
// sqrt(hd)); the heads' outputs, concatenated, go through the projection.
func (n *Net) attn(h [][]float64, attn model.Layer) [][]float64 {
	c := n.cfg
	d, hd := c.Width(), c.HeadDim
	qkv := n.linearRows(h, attn.Sub("qkv")) // [T][3d]
	T := len(qkv)
	y := make([][]float64, T) // [T][d]
	for i := range y {
		y[i] = make([]float64, d)
	}
	for head := 0; head < c.Heads; head++ {
		q, k, v := head*hd, d+head*hd, 2*d+head*hd // column offsets
		for i := 0; i < T; i++ {
			scores := make([]float64, i+1)
			for j := range scores {
				var s float64
				for e := 0; e < hd; e++ {
					s += qkv[i][q+e] * qkv[j][k+e]
				}
				scores[j] = s / math.Sqrt(float64(hd))
			}
			softmax(scores)
			for j, a := range scores {
				for e := 0; e < hd; e++ {
					y[i][head*hd+e] += a * qkv[j][v+e]
				}
			}
		}
	}
	return n.linearRows(y, attn.Sub("proj"))
}

// mlp is proj(gelu(fc(x))), 4d wide inside.
func (n *Net) mlp(x [][]float64, mlp model.Layer) [][]float64 {
	h := n.linearRows(x, mlp.Sub("fc")) // [T][4d]
	for _, row := range h {
		for f, v := range row {
			row[f] = gelu(v)
		}
	}
	return n.linearRows(h, mlp.Sub("proj")) // [T][d]
}

// gelu is GELU in its tanh approximation (Hendrycks & Gimpel, 2016).
func gelu(v float64) float64 {
	return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+model.GELUCubic*v*v*v)))
}

// softmax replaces x by exp(x) / sum(exp(x)), the maximum subtracted first.
func softmax(x []float64) {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	var z float64
	for i, v := range x {
		x[i] = math.Exp(v - mx)
		z += x[i]
	}
	for i := range x {
		x[i] /= z
	}
}

// layerNorm returns (x - mean) / sqrt(var + eps) * weight + bias over the
// features of one token x [d].
func (n *Net) layerNorm(x []float64, ln model.Layer) []float64 {
	g, b := n.w[ln.Weight()], n.w[ln.Bias()]
	var mean, vr float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		vr += (v - mean) * (v - mean)
	}
	vr /= float64(len(x))
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = (v-mean)/math.Sqrt(vr+model.LNEps)*g[i] + b[i]
	}
	return y
}

// layerNormRows applies layerNorm to every token of x [T][d].
func (n *Net) layerNormRows(x [][]float64, ln model.Layer) [][]float64 {
	y := make([][]float64, len(x))
	for j := range x {
		y[j] = n.layerNorm(x[j], ln)
	}
	return y
}

// linear returns x W + b for one row x [in], with W [in][out] and b [out]
// the weight and bias of layer l.
func (n *Net) linear(x []float64, l model.Layer) []float64 {
	w, b := n.w[l.Weight()], n.w[l.Bias()]
	in, out := len(x), len(b)
	if len(w) != in*out {
		panic(fmt.Sprintf("ref: %s has %d weights, want %d x %d", l, len(w), in, out))
	}
	y := make([]float64, out)
	for o := range y {
		s := b[o]
		for k := 0; k < in; k++ {
			s += x[k] * w[k*out+o]
		}
		y[o] = s
	}
	return y
}

// linearRows applies linear to every row of x [rows][in].
func (n *Net) linearRows(x [][]float64, l model.Layer) [][]float64 {
	y := make([][]float64, len(x))
	for i := range x {
		y[i] = n.linear(x[i], l)
	}
	return y
}

// addRows adds y to x, element by element (the residual connection).
func addRows(x, y [][]float64) {
	for j := range x {
		for f := range x[j] {
			x[j][f] += y[j][f]
		}
	}
}
