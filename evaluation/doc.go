// Package evaluation scores spike predictors on a split of a recording
// (docs/model.md section 5) and reports the scores: it is what
// `trainer eval` computes and what `trainer experiment` and `replay` reuse.
//
// A model is named by a spec (ParseSpec: "zero", "zero-pooled", "oracle",
// "glm:PATH", "ckpt:PATH[,PATH...]"). Each of its repeats is scored per
// cell (ScoreCells): the NLL over the split's windows and, from an
// autoregressive rollout (rollout.Run), the Van Rossum distance, Schreiber
// similarity and smoothed Pearson correlation against the recorded train.
// The repeats' per-cell scores are averaged (AverageRepeats) and summarised
// over cells by the interquartile mean with a 95% percentile-bootstrap
// interval (Summarise). Paired per-cell differences between two models
// come from Compare. A Report (the JSON of `trainer eval`) holds all of it,
// prints as a table (WriteTable, the one table layout of every command) and
// draws as a grid of charts (Report.Plot, WritePlot). With Options.Keep an
// evaluation also keeps a few cells' rollout trains of each model's first
// repeat in memory (ModelResult.Trains, not in the JSON), which
// Report.Raster draws against the recorded spikes (NewRaster).
//
// Invariants:
//   - per-cell scores are in the order of Options.Cells, and every model of
//     a Report is scored on the same cells, split, rollout bins, smoothing
//     and spike policy (its Scoring);
//   - repeats are averaged per cell before summarising, never summaries
//     averaged;
//   - summaries and comparisons are deterministic for a given Resamples and
//     Seed (the bootstrap is seeded);
//   - MetricNames fixes the metrics' order in tables, plots and JSON keys.
package evaluation
