// Package synth simulates retinal ganglion cell (RGC) recordings whose optimal
// next-spike prediction is known exactly, and provides that prediction: the
// oracle predictor and the Bayes-optimal negative log-likelihood (NLL) of a
// split.
//
// # The stimulus
//
// Like the real recording (Seifert et al. 2023, "Birds multiplex spectral and
// temporal visual information via retinal On- and Off-channels", Nature
// Communications; data/chicken-17-08-21), four LEDs (red, green, blue, UV)
// are switched on or off at random, each independently with probability 0.5,
// at about 20 Hz. Frame lengths are whole model bins (a trigger every
// 18 sensor samples at most), drawn independently from a discrete
// distribution: by default the real recording's frame-length histogram
// rounded to bins (45-55 bins, rarely 67 or 81-83; mean 49.6 bins = 893 sensor
// samples, like the real 802-1488 samples, mean 893). Bin-aligned frames make
// the stimulus the cells see an exact function of pattern and triggers.
//
// # The cell: a generalised linear model with spike history
//
// Each cell is a Poisson-like generalised linear model (GLM) with a spike
// history filter, the model of Pillow et al. (2008, "Spatio-temporal
// correlations and visual signalling in a complete neuronal population",
// Nature 454:995-999), simulated at the model's bin rate (rgc.BinRateHz). In
// bin u the conditional intensity is
//
//	lambda(u) = exp(b + sum_c sum_j k_c[j] s_c[u-j] + sum_{j>=1} h[j] y[u-j])
//
// where s_c[v] is LED c's state in the frame covering bin v, on/off as 1/0
// minus 0.5 (0 before the recording), y is the cell's own spike train
// (0/1 per bin), and a spike falls in bin u with probability
// 1 - exp(-lambda(u)) (the probability of at least one event of a Poisson
// process of rate lambda; at most one spike per bin is kept). Note that the
// drive is defined on the binned LED states; the model's input rows
// (rgc.BinStimulus) carry them exactly in the default causal mode (a
// synthetic recording's frames start on bin boundaries, so each bin's
// on-fraction is its state) and up to the filter's smoothing in zero-phase
// mode.
//
// The stimulus filter k_c is, per channel, a biphasic difference of two
// gamma-shaped lobes starting after a pure response latency of 36-54 bins
// (nothing in the first 35 ms, most weight 40-300 ms back, 320 bins long): a
// fast lobe (time constant 4-8 bins, peaking 8-16 bins after the latency)
// minus a slower one (1.5-2.2 times slower) holding 70-100% of its area, so
// the filter is nearly balanced and the cell answers LED transitions rather
// than held levels. Per-channel gains give ON cells (all gains positive), OFF
// cells (all negative) and colour-opponent cells (short and long wavelengths
// of opposite sign), echoing the On/Off and chromatic diversity of chicken
// RGCs reported by Seifert et al. (2023). Per-channel latencies differ by a
// few bins, so chromatic channels also differ in time. The filters are scaled
// so the drive has a standard deviation of 2.2-3.2 (nats of log intensity),
// large against the spontaneous level: like real chicken RGCs under full-field
// flashes, which fire precise, reliable bursts after LED transitions, most
// spikes come in bursts locked about 45-70 ms after a transition the cell
// prefers, and few are spontaneous (seed 1: 94% of spikes fall where the drive
// exceeds +2, 7 times the intensity at zero drive). The history filter h (100
// bins) is a strong refractory dip (about -4 to -8 decaying over 1-2.5 bins),
// a bursting bump (a Gaussian of height 0.5 to 2 peaking 4-10 bins after a
// spike) and a slow adaptation (-0.1 to -0.5 decaying over 15-40 bins,
// strengthened until a cell firing periodically at any period k <= 12 bins
// would feel sum_m h[mk] <= -2, so that no burst sustains itself). The
// baseline b is calibrated by simulation: each cell draws a target rate
// (log-uniform, 0.9-8 Hz), and b is set from the mean of exp(drive) over a
// 2-minute calibration stimulus, then corrected five times by
// b += log(target / simulated rate) (history included, same random numbers
// each time).
// Simulated rates follow the targets within sampling error (60 cells of seed
// 1: 0.86-7.6 Hz, mean 2.7), like the real quality cells' 0.8-8.6 Hz. Every
// parameter is drawn from a PCG generator (math/rand/v2) seeded by the
// population seed and the cell's index, so a population is reproducible.
//
// Because the cells are strongly and precisely driven, the oracle beats the
// zero-input model on all four evaluation metrics, not only on NLL: the
// autoregressive median rollout (../../rollout) of the exact model
// reproduces most bursts whose triggering transition it has already seen,
// and a misplaced spike is rare. With weakly driven cells (a drive of
// standard deviation about 1) the median rollout generated about a third of
// the spikes, often misplaced, and lost to the empty train on Van Rossum for
// low-rate cells.
//
// # The oracle
//
// For a window ending at bin t the oracle knows the stimulus up to t (the
// pattern of every frame that started at or before t, including the current
// one), the cell's spikes up to t (read from the window's spike row, so it
// also serves autoregressive rollouts) and the true parameters. Until the
// next spike the history term is determined, so the only uncertainty about
// bins t+1..t+80 is the stimulus: when the current frame ends (its length is
// distributed as the frame-length distribution conditioned on being longer
// than the time already elapsed), and the lengths and patterns (16, uniform)
// of later frames. Class k's probability is
//
//	P(k) = E_future[ prod_{j<k} (1-p_{t+1+j}) p_{t+1+k} ],  P(80) = E[prod (1-p)]
//
// The expectation is an exact finite sum over a tree of futures: a frame
// that starts at bin e changes the drive only from e+D on (D: the cell's
// response latency, its first non-zero filter lag), so frames starting after
// t+80-D are irrelevant and are never enumerated. Bins before a branch point
// are shared by all its branches, and lambda factorises as exp(known drive)
// times a precomputed exp(change of drive due to a frame switch), so each
// tree node costs at most one exponential per bin (a short polynomial, exact
// to rounding, when lambda < 0.02). With the default latencies
// (D >= 36) and frame lengths (>= 45 bins) at most one new frame matters, so
// a window costs at most about 15 x 16 short branches. There is no
// approximation: the probabilities sum to 1 up to rounding (tested to 1e-9).
//
// # What the model sees, and the look-ahead bound
//
// In the default causal mode a window ending at t holds exactly the frames
// up to t, so the specification's oracle (stimulus known up to t) is the
// strict lower bound. In zero-phase mode the model's stimulus rows come from
// a low-pass filter whose kernel reaches 16 bins (ModelLookahead) past each
// bin, so a window ending at t carries a little information about frames
// that start in t+1..t+16, and the specification's oracle is not a strict
// lower bound for a model of those windows: with
// SetLookahead(ModelLookahead) the oracle also knows every frame starting up
// to t+16, a superset of what any window holds, and its NLL is a strict
// lower bound. The two differ by a few hundredths of a nat: 0.7707 against
// 0.7407 nats on the test split of 60 cells x 15 minutes (seed 1; the
// zero-input model: 1.1275).
//
// # Checks
//
// The tests compare the oracle with brute-force Monte Carlo futures
// (chi-square per window, alpha 1e-4, including a three-level tree and the
// look-ahead oracle, with a power check against a predictor that ignores
// frame switches), check calibration and NLL = entropy on a simulated
// recording, check that the oracle beats the zero-input model and that cells
// fire at their calibrated target rates.
package synth
