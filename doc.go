// Package rgcpred predicts retinal ganglion cell spikes in real time.
//
// The repository's folders are floors: a package imports only packages in
// folders on its own floor or below (layers_test.go checks it from go list).
// Bottom up:
//
//	0 base/                 GEMM and vector kernels, thread teams' waiting, plotting, thread priority, CPU time, command-line conventions: no project imports
//	1 rgc/                  time base, recordings, windows, the Predictor seam, GLM, synthetic cells
//	2 model/                the model definition and its implementations: reference, training graph, engine, training
//	3 rollout/, stream/     autoregressive stepping, policies and metrics; the wire format and device client
//	4 evaluation/, experiment/  scoring and the paper's comparisons
//	5 serve/                the daemon core, NATS service, standby, recorder, model loading, embedded NATS, auth
//	6 bench/                latency benchmark and device simulator
//	7 cmd/                  flag parsing over the floors below
//
// docs/architecture.md describes each package.
package rgcpred
