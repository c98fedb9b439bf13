// Package gpu is the GPU inference engine: the forward pass of the model of
// docs/model.md section 2 on an NVIDIA GPU, behind rgc.Predictor, with the
// CPU engine's (model/engine) decisions.
//
// At load the weights come from the CPU engine's own preparation (batch
// norm folded into the convolutions, the attention scale into the queries:
// engine.Prepared), and are uploaded once. The forward pass is a fixed
// sequence of operations (plan.go): GEMMs on cuBLAS (fp32; TF32 where it
// passes a parity check at load) and the other layers as CUDA C kernels
// (kernels.cu, embedded and compiled by NVRTC at start-up for the device's
// architecture). Each batch size of a power of two up to MaxBatch has its
// own plan and CUDA graph: a call copies its windows into pinned memory,
// launches one graph (input copy, every kernel, output copy) and turns the
// head outputs into class probabilities on the host with
// model.Config.Probs, as the CPU engine does.
//
// Everything but the kernels' arithmetic is checked without a GPU:
// emulate.go runs each plan on the CPU, thread by thread as the kernels
// index, inside the bounds each operation declares, and its outputs are
// tested against the CPU engine. On a GPU, Engine.LayerParity compares
// every operation's output with that emulation (docs/engine.md, "The GPU
// backend").
package gpu
