package train

import (
	"fmt"

	"rgcpred/base/sgemm"
)

// Precision is the arithmetic of a run's training GEMMs (graph.Options.BF16):
// the forward and backward convolutions, linear layers and attention
// products. The weights, the optimiser and every other operation are
// float32 in both, and validation always runs in float32.
type Precision string

const (
	// PrecisionAuto is the faster arithmetic for training on this CPU:
	// fp32 on every CPU, since a training step with bf16 GEMMs runs
	// slower than fp32 even on the AVX512_BF16 kernels (docs/training.md,
	// "Precision").
	PrecisionAuto Precision = "auto"
	// PrecisionFP32 is float32 throughout.
	PrecisionFP32 Precision = "fp32"
	// PrecisionBF16 rounds both operands of every GEMM to bfloat16 and sums
	// the products in float32: on the AVX512_BF16 kernels where the CPU has
	// them, elsewhere emulated (operands rounded as they are packed for the
	// float32 kernels: the same numbers, no faster than fp32).
	PrecisionBF16 Precision = "bf16"
)

// ParsePrecision parses "auto", "fp32" or "bf16".
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(s); p {
	case PrecisionAuto, PrecisionFP32, PrecisionBF16:
		return p, nil
	}
	return "", fmt.Errorf("unknown precision %q (want %q, %q or %q)", s, PrecisionAuto, PrecisionFP32, PrecisionBF16)
}

// Resolve returns the arithmetic p stands for on this CPU: fp32 or bf16
// (auto and empty are fp32).
func (p Precision) Resolve() Precision {
	if p == PrecisionAuto || p == "" {
		return PrecisionFP32
	}
	return p
}

// Path says how this CPU runs a resolved precision: "native" (bf16 on the
// AVX512_BF16 kernels), "emulated" (bf16 by rounding), or "" for fp32.
func (p Precision) Path() string {
	switch {
	case p != PrecisionBF16:
		return ""
	case sgemm.BF16Native():
		return "native"
	}
	return "emulated"
}

// describe is a resolved precision for the run's log.
func (p Precision) describe() string {
	switch p.Path() {
	case "native":
		return "bf16 GEMMs on the AVX512_BF16 kernels (float32 accumulation, weights and other ops)"
	case "emulated":
		return "bf16 GEMMs emulated: operands rounded to bfloat16 while packed for the float32 kernels " +
			"(float32 accumulation, weights and other ops; this CPU lacks AVX512_BF16, so no speed gain)"
	}
	return "fp32 arithmetic"
}
