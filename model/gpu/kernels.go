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

// kernelOptions are the NVRTC options of every compilation: the model's
// shared constants (model/consts.go) as macros, so that the kernels
// restate none of them.
func kernelOptions() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) + "f" }
	return []string{
		"-DRGC_LN_EPS=" + f(model.LNEps),
		"-DRGC_GELU_CUBIC=" + f(model.GELUCubic),
	}
}

// CompileKernels compiles the kernels for arch ("sm_90") and returns the
// cubin and NVRTC's log (warnings; empty when clean).
func CompileKernels(nv *cuda.NVRTC, arch string) (cuda.Compiled, error) {
	c, err := nv.Compile(kernelSource, KernelFile, arch, kernelOptions()...)
	if err != nil {
		return c, fmt.Errorf("gpu: compile kernels: %w", err)
	}
	return c, nil
}

// cubins caches each architecture's compiled kernels for the process: an
// engine made again (a reload, another configuration) does not compile
// them again.
var cubins = struct {
	sync.Mutex
	m map[string][]byte
}{m: map[string][]byte{}}

// cubinFor returns the kernels compiled for arch, compiling them once.
func cubinFor(nv *cuda.NVRTC, arch string) ([]byte, error) {
	cubins.Lock()
	defer cubins.Unlock()
	if c, ok := cubins.m[arch]; ok {
		return c, nil
	}
	c, err := CompileKernels(nv, arch)
	if err != nil {
		return nil, err
	}
	cubins.m[arch] = c.Cubin
	return c.Cubin, nil
}
