// Package glm fits the classical baseline of docs/model.md
// section 6 to a recording: a generalised linear model with a linear
// stimulus filter, a spike-history filter and an exponential nonlinearity
// (Pillow et al. 2008, "Spatio-temporal correlations and visual signalling
// in a complete neuronal population", Nature 454:995-999), and evaluates it
// exactly like the neural models.
//
// # The model
//
// It is rgc/synth's cell model (see that package's documentation): in bin u
//
//	lambda(u) = exp(b + sum_c sum_j k_c[j] s_c[u-j] + sum_{j>=1} h[j] y[u-j])
//
// with s_c the +-0.5 state of LED c in the stimulus frame covering a bin
// (triggers rounded to the nearest bin boundary, AlignFrames), y the spike
// indicator, and a spike in bin u with probability 1 - exp(-lambda(u)).
// Fit maximises exactly this Bernoulli likelihood (a complementary log-log
// binary regression), not its Poisson approximation: the two differ where
// lambda is not small, inside the bursts that carry most spikes, and only
// the Bernoulli form is the model the oracle evaluates. The filters are
// weighted sums of raised-cosine bumps on a logarithmic time axis (Basis):
// 9 per LED, zero below a 36-bin response latency, and 10 for the history,
// 47 parameters per cell with the bias.
//
// # The latency constraint
//
// rgc/synth's oracle is exact because it enumerates the futures of the
// stimulus: while the current frame lasts and, once it ends, every length
// and pattern of the next one. That is cheap only when no frame after the
// next can reach the 80-bin horizon, i.e. when the response latency exceeds
// 79 bins minus the shortest frame (44 bins on the real recording's aligned
// triggers): the stimulus filters are zero below lag 36 (Options.MinLag).
//
// # Fitting
//
// Per cell, on the training split only: Newton's method with an exact
// gradient, a Hessian from curvature-weighted systematic sampling of the
// bins (Options.HessianRows) and a backtracking line search; the loss is
// convex, so this converges to the unique optimum. The stimulus columns of
// the design matrix are computed once and shared by all cells; only the
// history columns are per cell. An L2 penalty on standardised weights is
// chosen per cell among Options.Alphas by the validation split's per-bin
// likelihood.
//
// # Evaluation
//
// The fitted model is returned as a synth.Truth; Predictor wraps the oracle
// of that truth on the recording's aligned stimulus so that `trainer eval
// --glm` scores it (NLL and autoregressive rollouts) like any predictor.
package glm
