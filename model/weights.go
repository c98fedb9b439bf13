package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Weights holds every tensor named by Config.Params, as flat row-major
// float32 slices. It is the single source of parameters for the training
// graph, the inference engine and checkpoints.
type Weights struct {
	// Config is the architecture the tensors belong to.
	Config Config
	// Tensors maps each parameter name of Config.Params to its values.
	Tensors map[string][]float32
}

// NewWeights returns weights for c with every tensor allocated: batch-norm
// and layer-norm scales and batch-norm running variances are 1, everything
// else 0.
func NewWeights(c Config) *Weights {
	w := &Weights{Config: c, Tensors: make(map[string][]float32)}
	for _, p := range c.Params() {
		t := make([]float32, p.Size())
		if isUnitInit(p) {
			for i := range t {
				t[i] = 1
			}
		}
		w.Tensors[p.Name] = t
	}
	return w
}

func isUnitInit(p ParamSpec) bool {
	return (p.Kind == KindNorm && strings.HasSuffix(p.Name, ".weight")) ||
		(p.Kind == KindStat && strings.HasSuffix(p.Name, ".running_var"))
}

// InitWeights returns freshly initialised weights drawn from rng:
// convolutions and the encoder's linear layers from N(0, 2/fan_in) (He),
// transformer linear layers and embeddings from N(0, 0.02^2) with the
// residual projections scaled by 1/sqrt(2 x layers) (GPT-2), biases 0, norms 1.
func InitWeights(c Config, rng *rand.Rand) *Weights {
	w := NewWeights(c)
	for _, p := range c.Params() {
		t := w.Tensors[p.Name]
		var std float64
		switch {
		case p.Kind == KindEmbed:
			std = 0.02
		case p.Kind != KindWeight:
			continue
		case strings.HasPrefix(p.Name, "cnn."):
			fanIn := p.Size() / p.Shape[len(p.Shape)-1] // linear [in,out]
			if len(p.Shape) == 3 {                      // conv [out,in,k]
				fanIn = p.Shape[1] * p.Shape[2]
			}
			std = math.Sqrt(2 / float64(fanIn))
		case strings.HasSuffix(p.Name, "attn.proj.weight") || strings.HasSuffix(p.Name, "mlp.proj.weight"):
			std = 0.02 / math.Sqrt(2*float64(c.Layers))
		default:
			std = 0.02
		}
		for i := range t {
			t[i] = float32(rng.NormFloat64() * std)
		}
	}
	return w
}

// ParityWeights returns weights for c, reproducible from seed, in which
// every layer matters for the output: He-initialised convolutions, random
// batch-norm statistics and scales, transformer weights at std 0.15,
// embeddings at 0.5. Trained or freshly initialised weights leave some
// layers near identity; parity checks between implementations use these.
func ParityWeights(c Config, seed uint64) *Weights {
	rng := rand.New(rand.NewPCG(seed, 99))
	w := InitWeights(c, rng)
	for _, p := range c.Params() {
		ts := w.Tensors[p.Name]
		for i := range ts {
			switch {
			case strings.HasSuffix(p.Name, "running_mean"):
				ts[i] = float32(0.2 * rng.NormFloat64())
			case strings.HasSuffix(p.Name, "running_var"):
				ts[i] = float32(0.5 + rng.Float64())
			case p.Kind == KindNorm && strings.HasSuffix(p.Name, ".weight"):
				ts[i] = float32(0.5 + rng.Float64())
			case p.Kind == KindNorm || p.Kind == KindBias:
				ts[i] = float32(0.1 * rng.NormFloat64())
			case p.Kind == KindEmbed:
				ts[i] = float32(0.5 * rng.NormFloat64())
			case p.Kind == KindWeight && !strings.HasPrefix(p.Name, "cnn."):
				ts[i] = float32(0.15 * rng.NormFloat64())
			}
		}
	}
	return w
}

// Get returns the tensor called name; it panics if the name is not one of
// the configuration's parameters (a programming error, not a data error).
func (w *Weights) Get(name string) []float32 {
	t, ok := w.Tensors[name]
	if !ok {
		panic(fmt.Sprintf("model: no weight %q in %s", name, w.Config.Name()))
	}
	return t
}

// Check verifies that the weights hold exactly the configuration's tensors
// with the right sizes and finite values.
func (w *Weights) Check() error {
	if err := w.Config.Validate(); err != nil {
		return err
	}
	ps := w.Config.Params()
	if len(w.Tensors) != len(ps) {
		return fmt.Errorf("weights: %d tensors, config %s has %d", len(w.Tensors), w.Config.Name(), len(ps))
	}
	for _, p := range ps {
		t, ok := w.Tensors[p.Name]
		if !ok {
			return fmt.Errorf("weights: missing tensor %s", p.Name)
		}
		if len(t) != p.Size() {
			return fmt.Errorf("weights: tensor %s has %d values, want %d (shape %v)", p.Name, len(t), p.Size(), p.Shape)
		}
		for i, v := range t {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("weights: tensor %s[%d] is %v", p.Name, i, v)
			}
		}
	}
	return nil
}

// Equal reports whether w and o hold the same configuration and tensors,
// bit for bit.
func (w *Weights) Equal(o *Weights) bool {
	if w.Config != o.Config || len(w.Tensors) != len(o.Tensors) {
		return false
	}
	for name, t := range w.Tensors {
		u, ok := o.Tensors[name]
		if !ok || len(u) != len(t) {
			return false
		}
		for i := range t {
			if math.Float32bits(t[i]) != math.Float32bits(u[i]) {
				return false
			}
		}
	}
	return true
}

// Clone returns a deep copy of the weights.
func (w *Weights) Clone() *Weights {
	c := &Weights{Config: w.Config, Tensors: make(map[string][]float32, len(w.Tensors))}
	for k, v := range w.Tensors {
		c.Tensors[k] = append([]float32(nil), v...)
	}
	return c
}
