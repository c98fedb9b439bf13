// Package cuda binds the parts of CUDA the GPU engine uses, at run time and
// without cgo (github.com/ebitengine/purego): the driver API of
// libcuda.so.1 (device, primary context, memory, pinned host buffers,
// streams, modules, kernel launches, CUDA graphs), the run-time compiler
// NVRTC (CUDA C source to cubins; it needs no GPU) and cuBLAS's fp32 GEMM.
//
// The libraries are looked for where CUDA installs them (SearchDirs): a
// folder list given by a flag or $RGCPRED_CUDA_LIB first, then
// $LD_LIBRARY_PATH, the toolkit's folders, the NVIDIA Python wheels' and
// the distribution's. A build without them still compiles and runs: only
// the calls that need them fail, with an error saying what was looked for
// and where.
//
// Every failed CUDA call becomes an *Error naming the call and carrying
// CUDA's own name and message for the result. A Device's context is
// current on one goroutine locked to its OS thread; every call that needs
// the context runs there, through Device.Do.
package cuda
