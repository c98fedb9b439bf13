// Package experiment runs the paper's comparisons (docs/model.md section
// 6): a grid of model configurations x seeds trained at one matched budget
// and scored beside the GLM and zero-input baselines.
//   - Every finished run is scored on a split with the four metrics (NLL
//     and, from autoregressive rollouts, Van Rossum distance, Schreiber
//     similarity and smoothed Pearson correlation).
//   - A configuration's per-cell scores are averaged over its seeds, then
//     summarised over cells by the interquartile mean with a 95%
//     percentile-bootstrap interval; models are compared by paired per-cell
//     differences.
//
// An experiment lives in a directory: a manifest (manifest.json) that holds
// the plan, the evaluation settings, the command line and every run's
// status, and one directory per run with its checkpoints.
//   - Runs train in segments whose boundaries are saved, so a killed
//     experiment continues where it stopped and finishes with the results
//     an uninterrupted one gets (see Run).
//   - Evaluations are cached per run, split and settings.
//
// Scoring, summaries, comparisons and the table layout come from package
// evaluation, the one `trainer eval` uses, so both commands score models
// one way.
package experiment
