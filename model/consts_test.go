package model

import (
	"math/rand/v2"
	"testing"
)

// TestLayerNames checks that the Layer helpers spell names Config.Params
// lists, for every kind of tensor suffix.
func TestLayerNames(t *testing.T) {
	c, err := ParseConfigName("gpt-b-logmix", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ got, want string }{
		{LayerConv1.Weight(), "cnn.conv1.weight"},
		{LayerBN2.RunningVar(), "cnn.bn2.running_var"},
		{CNNBlock(2).Sub("se.fc1").Weight(), "cnn.blocks.2.se.fc1.weight"},
		{CNNBlock(0).Sub("shortcut.bn").RunningMean(), "cnn.blocks.0.shortcut.bn.running_mean"},
		{GPTBlock(5).Sub("attn.qkv").Bias(), "gpt.blocks.5.attn.qkv.bias"},
		{LayerProj.Weight(), "gpt.proj.weight"},
		{LayerLNF.Bias(), "gpt.ln_f.bias"},
		{LayerHead.Weight(), "head.weight"},
		{ParamCellEmb, "gpt.cell_emb"},
		{ParamPosEmb, "gpt.pos_emb"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
		if _, ok := c.Param(tc.got); !ok {
			t.Errorf("%s is not a parameter of %s", tc.got, c.Name())
		}
	}
	if _, ok := c.Param("cnn.blocks.3.shortcut.conv.weight"); ok {
		t.Error("block 3 keeps its shape and must have no shortcut convolution")
	}
}

// TestConfigProbs checks that Config.Probs is CatProbs for the cat head and
// LogMixProbs for logmix, bit for bit, and panics on wrong lengths.
func TestConfigProbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, name := range []string{"gpt-a-cat", "gpt-a-logmix"} {
		c, err := ParseConfigName(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, c.HeadOut())
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		got, want := make([]float32, c.Classes), make([]float32, c.Classes)
		c.Probs(out, got)
		if c.Head == HeadCat {
			CatProbs(out, want)
		} else {
			LogMixProbs(out, c.Mixtures, want)
		}
		for k := range want {
			if got[k] != want[k] {
				t.Fatalf("%s class %d: Probs %v, want %v", name, k, got[k], want[k])
			}
		}
		if err := CheckDist(got); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Probs accepted %d head outputs", name, len(out)-1)
				}
			}()
			c.Probs(out[1:], got)
		}()
	}
}
