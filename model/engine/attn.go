package engine

// fusedAttn selects the fused attention kernel where the CPU has it (tests
// switch it off to compare with the GEMM path).
var fusedAttn = hasAVX512

// fusedAttn reports whether the network's attention runs on the fused
// kernel: AVX-512, 64 tokens and heads of 16 or 32 features.
func (n *network) fusedAttn() bool {
	return fusedAttn && n.tokens == 64 && (n.headDim == 16 || n.headDim == 32)
}
