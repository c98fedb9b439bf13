package model

// FLOPs returns the floating-point operations of one window's forward pass
// as an inference engine needs it (docs/model.md section 2), a multiply-add
// counting as two: the floor of an engine's cost per prediction is FLOPs
// over the machine's peak multiply-add rate.
//   - Counted: the convolutions, the squeeze-excite layers, the
//     transformer's projections, causal attention (query i meets keys
//     0..i) and MLPs, and the head.
//   - Only the last token feeds the head, so the last transformer block
//     counts attention, projection and MLP for that token alone (its keys
//     and values still need every token).
//   - Left out: element-wise work (norms, activations, softmax), a few
//     percent of the total and not multiply-add bound.
func (c Config) FLOPs() int64 {
	var mac int64
	// CNN encoder: conv1 (stride 2) and conv2 over the stem's positions.
	stem := int64(c.InBins / 2)
	mac += stem * int64(c.InRows*c.StemKernel*c.StemCh)
	mac += stem * int64(c.StemCh*c.StemKernel*c.StemCh)
	lIn := stem
	for i := 0; i < c.NumBlocks(); i++ {
		in, mid, out := int64(c.BlockIn(i)), int64(c.BlockMid), int64(c.BlockOut)
		lOut := lIn / int64(c.BlockStride(i))
		mac += lIn * in * mid                          // conv1, 1x1
		mac += lOut * mid * int64(c.BlockKernel) * mid // conv2
		mac += lOut * mid * out                        // conv3, 1x1
		mac += 2 * out * (out / int64(c.SEReduction))  // squeeze-excite fc1, fc2
		if c.BlockHasShortcut(i) {
			mac += lOut * in * out // shortcut, 1x1 strided
		}
		lIn = lOut
	}
	// Transformer.
	T, d := int64(c.Tokens()), int64(c.Width())
	if c.HasProj() {
		mac += T * int64(c.BlockOut) * d
	}
	causal := T * (T + 1) / 2 // query-key pairs of causal attention
	for l := 0; l < c.Layers; l++ {
		mac += T * d * 3 * d // q, k, v for every token
		q, pairs := T, causal
		if l == c.Layers-1 {
			q, pairs = 1, T // the last token only
		}
		mac += 2 * pairs * d     // q k^T and att v, over all heads
		mac += q * d * d         // attention output projection
		mac += q * d * 4 * d * 2 // MLP fc and proj
	}
	mac += d * int64(c.HeadOut()) // head on the last token
	return 2 * mac
}
