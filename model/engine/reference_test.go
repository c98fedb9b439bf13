package engine

import (
	"fmt"
	"math"

	"rgcpred/model"
)

// This file is the slow, obviously-correct float64 forward pass the engine
// is tested against: layout [channels][length] as in the specification,
// direct convolutions, batch norm applied (not folded), full attention for
// every token, no caching of anything.

type refNet struct {
	c model.Config
	w *model.Weights
}

func (r refNet) get(name string) []float64 {
	t := r.w.Get(name)
	out := make([]float64, len(t))
	for i, v := range t {
		out[i] = float64(v)
	}
	return out
}

// conv1d: x [cin][l], kernel [cout][cin][k], "same" zero padding k/2,
// stride s -> [cout][l/s] (output position o reads inputs o*s-k/2 .. o*s+k/2).
func (r refNet) conv1d(x [][]float64, name string, stride int) [][]float64 {
	w := r.get(name)
	var shape []int
	for _, p := range r.c.Params() {
		if p.Name == name {
			shape = p.Shape
		}
	}
	cout, cin, k := shape[0], shape[1], shape[2]
	l := len(x[0])
	lout := (l+2*(k/2)-k)/stride + 1
	y := make([][]float64, cout)
	for o := 0; o < cout; o++ {
		y[o] = make([]float64, lout)
		for pos := 0; pos < lout; pos++ {
			var s float64
			for i := 0; i < cin; i++ {
				for t := 0; t < k; t++ {
					j := pos*stride - k/2 + t
					if j >= 0 && j < l {
						s += w[(o*cin+i)*k+t] * x[i][j]
					}
				}
			}
			y[o][pos] = s
		}
	}
	return y
}

// batchNorm with running statistics, eps 1e-5.
func (r refNet) batchNorm(x [][]float64, prefix string) {
	g, b := r.get(prefix+".weight"), r.get(prefix+".bias")
	m, v := r.get(prefix+".running_mean"), r.get(prefix+".running_var")
	for c := range x {
		for j := range x[c] {
			x[c][j] = (x[c][j]-m[c])/math.Sqrt(v[c]+1e-5)*g[c] + b[c]
		}
	}
}

func reluRef(x [][]float64) {
	for c := range x {
		for j := range x[c] {
			x[c][j] = math.Max(x[c][j], 0)
		}
	}
}

// linearRef: x [rows][in] W [in][out] + b.
func (r refNet) linearRef(x [][]float64, prefix string) [][]float64 {
	w, b := r.get(prefix+".weight"), r.get(prefix+".bias")
	in, out := len(x[0]), len(b)
	if len(w) != in*out {
		panic(fmt.Sprintf("%s: %d weights for %dx%d", prefix, len(w), in, out))
	}
	y := make([][]float64, len(x))
	for i := range x {
		y[i] = make([]float64, out)
		for o := 0; o < out; o++ {
			s := b[o]
			for k := 0; k < in; k++ {
				s += x[i][k] * w[k*out+o]
			}
			y[i][o] = s
		}
	}
	return y
}

func (r refNet) layerNormRef(x []float64, prefix string) []float64 {
	g, b := r.get(prefix+".weight"), r.get(prefix+".bias")
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
		y[i] = (v-mean)/math.Sqrt(vr+1e-5)*g[i] + b[i]
	}
	return y
}

// forward returns the head outputs for one window [InRows*InBins] and
// embedding row cell.
func (r refNet) forward(window []float32, cell int) []float64 {
	c := r.c
	x := make([][]float64, c.InRows)
	for i := range x {
		x[i] = make([]float64, c.InBins)
		for j := range x[i] {
			x[i][j] = float64(window[i*c.InBins+j])
		}
	}
	// Stem convolutions.
	x = r.conv1d(x, "cnn.conv1.weight", 2)
	r.batchNorm(x, "cnn.bn1")
	reluRef(x)
	x = r.conv1d(x, "cnn.conv2.weight", 1)
	r.batchNorm(x, "cnn.bn2")
	reluRef(x)
	// Bottleneck blocks.
	for i := 0; i < c.NumBlocks(); i++ {
		p := fmt.Sprintf("cnn.blocks.%d", i)
		s := c.BlockStride(i)
		h := r.conv1d(x, p+".conv1.weight", 1)
		r.batchNorm(h, p+".bn1")
		reluRef(h)
		h = r.conv1d(h, p+".conv2.weight", s)
		r.batchNorm(h, p+".bn2")
		reluRef(h)
		h = r.conv1d(h, p+".conv3.weight", 1)
		r.batchNorm(h, p+".bn3")
		// Squeeze-excite.
		pooled := make([]float64, len(h))
		for ch := range h {
			for _, v := range h[ch] {
				pooled[ch] += v
			}
			pooled[ch] /= float64(len(h[ch]))
		}
		z := r.linearRef([][]float64{pooled}, p+".se.fc1")[0]
		for i := range z {
			z[i] = math.Max(z[i], 0)
		}
		g := r.linearRef([][]float64{z}, p+".se.fc2")[0]
		for ch := range h {
			gate := 1 / (1 + math.Exp(-g[ch]))
			for j := range h[ch] {
				h[ch][j] *= gate
			}
		}
		sc := x
		if c.BlockHasShortcut(i) {
			sc = r.conv1d(x, p+".shortcut.conv.weight", s)
			r.batchNorm(sc, p+".shortcut.bn")
		}
		for ch := range h {
			for j := range h[ch] {
				h[ch][j] = math.Max(h[ch][j]+sc[ch][j], 0)
			}
		}
		x = h
	}
	// Tokens: token j = position j, feature f = channel f.
	T := len(x[0])
	tok := make([][]float64, T)
	for j := range tok {
		tok[j] = make([]float64, len(x))
		for f := range x {
			tok[j][f] = x[f][j]
		}
	}
	if c.HasProj() {
		tok = r.linearRef(tok, "gpt.proj")
	}
	d := c.Width()
	pos, emb := r.get("gpt.pos_emb"), r.get("gpt.cell_emb")
	for j := range tok {
		for f := 0; f < d; f++ {
			tok[j][f] += pos[j*d+f] + emb[cell*d+f]
		}
	}
	hd := c.HeadDim
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("gpt.blocks.%d", l)
		h := make([][]float64, T)
		for j := range tok {
			h[j] = r.layerNormRef(tok[j], p+".ln1")
		}
		qkv := r.linearRef(h, p+".attn.qkv")
		y := make([][]float64, T)
		for i := range y {
			y[i] = make([]float64, d)
		}
		for head := 0; head < c.Heads; head++ {
			for i := 0; i < T; i++ {
				scores := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					var s float64
					for e := 0; e < hd; e++ {
						s += qkv[i][head*hd+e] * qkv[j][d+head*hd+e]
					}
					scores[j] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, scores[j])
				}
				var z float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - mx)
					z += scores[j]
				}
				for j := range scores {
					for e := 0; e < hd; e++ {
						y[i][head*hd+e] += scores[j] / z * qkv[j][2*d+head*hd+e]
					}
				}
			}
		}
		a := r.linearRef(y, p+".attn.proj")
		for j := range tok {
			for f := range tok[j] {
				tok[j][f] += a[j][f]
			}
		}
		for j := range tok {
			h[j] = r.layerNormRef(tok[j], p+".ln2")
		}
		m := r.linearRef(h, p+".mlp.fc")
		for j := range m {
			for f, v := range m[j] {
				m[j][f] = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
			}
		}
		m = r.linearRef(m, p+".mlp.proj")
		for j := range tok {
			for f := range tok[j] {
				tok[j][f] += m[j][f]
			}
		}
	}
	last := r.layerNormRef(tok[T-1], "gpt.ln_f")
	return r.linearRef([][]float64{last}, "head")[0]
}
