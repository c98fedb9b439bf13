package gpu

import (
	_ "embed"
	"fmt"
	"strconv"
	"sync"

	"rgcpred/base/cuda"
	"rgcpred/model"
)

//go:embed kernels.cu
var kernelSource string

// KernelFile is the name the kernels' source carries in NVRTC's messages.
const KernelFile = "kernels.cu"

// Archs are the architectures the kernels are checked to compile for
// (TestKernelsCompile): A100 (sm_80) and H100 (sm_90).
var Archs = []string{"sm_80", "sm_90"}

// kernelOptions are the NVRTC options of a compilation for attention
// heads of headDim: the model's shared constants (model/consts.go) and the
// head size as macros, so that the kernels restate none of them.
func kernelOptions(headDim int) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) + "f" }
	return []string{
		"-DRGC_LN_EPS=" + f(model.LNEps),
		"-DRGC_GELU_CUBIC=" + f(model.GELUCubic),
		"-DRGC_HEAD_DIM=" + strconv.Itoa(headDim),
	}
}

// CompileKernels compiles the kernels for arch ("sm_90") and attention
// heads of headDim (1..32) and returns the cubin and NVRTC's log
// (warnings; empty when clean).
func CompileKernels(nv *cuda.NVRTC, arch string, headDim int) (cuda.Compiled, error) {
	if err := checkHeadDim(headDim); err != nil {
		return cuda.Compiled{}, err
	}
	c, err := nv.Compile(kernelSource, KernelFile, arch, kernelOptions(headDim)...)
	if err != nil {
		return c, fmt.Errorf("gpu: compile kernels: %w", err)
	}
	return c, nil
}

// HeadDims are the attention head sizes the kernels are checked to
// compile for (TestKernelsCompile): gpt-a's and gpt-b's.
var HeadDims = []int{16, 32}

// checkHeadDim rejects a head size the attention kernel cannot hold in
// registers.
func checkHeadDim(hd int) error {
	if hd < 1 || hd > maxHeadDim {
		return fmt.Errorf("gpu: attention heads of %d: the GPU kernels take 1..%d", hd, maxHeadDim)
	}
	return nil
}

// cubinKey names a compilation: architecture and head size.
type cubinKey struct {
	arch    string
	headDim int
}

// cubins caches each compilation's kernels for the process: an engine
// made again (a reload, another configuration of the same head size) does
// not compile them again.
var cubins = struct {
	sync.Mutex
	m map[cubinKey][]byte
}{m: map[cubinKey][]byte{}}

// cubinFor returns the kernels compiled for arch and headDim, compiling
// them once.
func cubinFor(nv *cuda.NVRTC, arch string, headDim int) ([]byte, error) {
	cubins.Lock()
	defer cubins.Unlock()
	k := cubinKey{arch, headDim}
	if c, ok := cubins.m[k]; ok {
		return c, nil
	}
	c, err := CompileKernels(nv, arch, headDim)
	if err != nil {
		return nil, err
	}
	cubins.m[k] = c.Cubin
	return c.Cubin, nil
}
