// Package torchmap converts checkpoints to and from safetensors files laid
// out as the state_dict of the PyTorch reference module (SpikeModel of
// shared/tools/torchref.py; docs/interop.md): module names, nn.Linear's
// [out, in] weight layout, nn.MultiheadAttention's fused in_proj, and
// BatchNorm1d's buffers (running statistics and num_batches_tracked).
package torchmap

import (
	"strings"

	"rgcpred/model"
)

// Buffers of the PyTorch module that have no counterpart among the
// checkpoint's weights: Export writes them so that load_state_dict(strict=True)
// accepts the file, Import checks and drops them.
const (
	// MaskName is SpikeModel's causal attention mask buffer [T, T]: 0 on and
	// below the diagonal, -inf above.
	MaskName = "mask"
	// BatchesTrackedSuffix ends each BatchNorm1d's int64 scalar buffer.
	BatchesTrackedSuffix = ".num_batches_tracked"
)

// mapping pairs one checkpoint tensor with its PyTorch state_dict entry.
type mapping struct {
	ours, torch string
	// transpose marks linear weights: ours [in, out], PyTorch [out, in].
	transpose bool
	shape     []int // our shape
}

// mappings lists every checkpoint tensor with its PyTorch name and layout.
func mappings(c model.Config) []mapping {
	ps := c.Params()
	out := make([]mapping, len(ps))
	for i, p := range ps {
		name, tr := TorchName(p.Name)
		out[i] = mapping{ours: p.Name, torch: name, transpose: tr && len(p.Shape) == 2, shape: p.Shape}
	}
	return out
}

// renames maps our module paths to SpikeModel's, longest match first in
// the order they are tried.
var renames = []struct{ ours, torch string }{
	{"gpt.cell_emb", "cell.weight"},
	{"gpt.pos_emb", "pos"},
	{"gpt.proj.", "proj."},
	{"gpt.ln_f.", "lnf."},
	{"gpt.blocks.", "blocks."},
	{".attn.qkv.weight", ".attn.in_proj_weight"},
	{".attn.qkv.bias", ".attn.in_proj_bias"},
	{".attn.proj.", ".attn.out_proj."},
	{".mlp.fc.", ".mlp.0."},
	{".mlp.proj.", ".mlp.2."},
	{".shortcut.conv.", ".short.0."},
	{".shortcut.bn.", ".short.1."},
}

// blockRenames applies inside cnn.blocks.N only.
var blockRenames = []struct{ ours, torch string }{
	{".conv1.", ".c1."}, {".conv2.", ".c2."}, {".conv3.", ".c3."},
	{".bn1.", ".b1."}, {".bn2.", ".b2."}, {".bn3.", ".b3."},
}

// TorchName returns the PyTorch state_dict name of our tensor name and
// whether the tensor is a linear weight stored transposed ([out, in]) there.
func TorchName(ours string) (string, bool) {
	n := ours
	if strings.HasPrefix(n, "cnn.blocks.") {
		for _, r := range blockRenames {
			n = strings.Replace(n, r.ours, r.torch, 1)
		}
	}
	for _, r := range renames {
		n = strings.Replace(n, r.ours, r.torch, 1)
	}
	linear := strings.HasSuffix(ours, ".weight") && (strings.Contains(ours, ".se.fc") || strings.Contains(ours, ".attn.") ||
		strings.Contains(ours, ".mlp.") || ours == "gpt.proj.weight" || ours == "head.weight")
	return n, linear
}

// transpose returns the [cols, rows] transpose of the row-major [rows, cols] v.
func transpose(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = v[r*cols+c]
		}
	}
	return out
}

// batchNormPrefixes returns the PyTorch module path of every batch norm.
func batchNormPrefixes(c model.Config) []string {
	var out []string
	for _, m := range mappings(c) {
		if p, ok := strings.CutSuffix(m.torch, ".running_mean"); ok {
			out = append(out, p)
		}
	}
	return out
}
