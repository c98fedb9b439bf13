package gpu

import (
	"flag"
	"fmt"
)

// Backend names.
const (
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
)

// Flags are the command-line flags that choose the inference backend,
// shared by predictord, the latency bench and trainer eval.
type Flags struct {
	Backend   string // BackendCPU or BackendCUDA
	Device    int    // the GPU's ordinal
	LibDirs   string // folders searched first for the CUDA libraries
	Precision string // the GEMMs' arithmetic: fp32 or tf32
}

// AddFlags registers --backend, --gpu, --cuda-lib and --gpu-precision on
// fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Backend, "backend", BackendCPU, "inference backend: cpu (the pure-Go engine) or cuda (the GPU engine: needs an NVIDIA GPU with its driver, NVRTC and cuBLAS; docs/engine.md)")
	fs.IntVar(&f.Device, "gpu", 0, "with --backend cuda: the GPU's ordinal")
	fs.StringVar(&f.LibDirs, "cuda-lib", "", "with --backend cuda: folders searched first for libcuda, libnvrtc and libcublas (colon-separated; also $RGCPRED_CUDA_LIB)")
	fs.StringVar(&f.Precision, "gpu-precision", string(FP32), "with --backend cuda: the GEMMs' arithmetic, fp32 or tf32 (tensor cores; used only where it passes a parity check against fp32 at load)")
	return f
}

// CUDA reports whether the GPU backend is chosen; an unknown backend is an
// error.
func (f *Flags) CUDA() (bool, error) {
	switch f.Backend {
	case BackendCPU:
		return false, nil
	case BackendCUDA:
		return true, nil
	}
	return false, fmt.Errorf("--backend %q: want %s or %s", f.Backend, BackendCPU, BackendCUDA)
}

// Options returns the engine options the flags give, for batches of up to
// maxBatch windows.
func (f *Flags) Options(maxBatch int) (Options, error) {
	p, err := ParsePrecision(f.Precision)
	if err != nil {
		return Options{}, fmt.Errorf("--gpu-precision: %w", err)
	}
	return Options{MaxBatch: maxBatch, Device: f.Device, LibDirs: f.LibDirs, Precision: p}, nil
}

// Describe names what serves: precision in effect, its parity check when
// TF32 was asked for, and the device.
func (e *Engine) Describe() string {
	_, par := e.Precision()
	s := fmt.Sprintf("%s on %s", e.Arithmetic(), e.Device())
	if par.Windows > 0 {
		s += fmt.Sprintf(" (tf32 asked for; parity with fp32: %s)", par)
	}
	return s
}
