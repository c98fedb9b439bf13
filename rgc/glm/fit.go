package glm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
)

// Options configure Fit. Start from DefaultOptions.
type Options struct {
	// MinLag is the first lag (bins) at which the stimulus filters may be
	// non-zero: the cells' pure response latency. The oracle of rgc/synth
	// is exact and fast only when at most one new frame can affect the next
	// rgc.Horizon bins, i.e. MinLag > Horizon-1-(shortest frame); with the
	// real recording's 44-bin shortest aligned frame that is MinLag >= 36.
	// Smaller values fit (and report per-bin likelihoods) but the oracle
	// refuses or crawls.
	MinLag int `json:"min_lag"`
	// StimBases is the number of raised-cosine bumps per LED.
	StimBases int `json:"stim_bases"`
	// StimLastPeak is the lag after MinLag of the last stimulus bump's peak.
	StimLastPeak float64 `json:"stim_last_peak"`
	// StimOffset is the stimulus basis' log-axis offset (bins): larger is
	// closer to linear spacing.
	StimOffset float64 `json:"stim_offset"`
	// HistBases is the number of spike-history bumps.
	HistBases int `json:"hist_bases"`
	// HistLastPeak is the lag after lag 1 of the last history bump's peak.
	HistLastPeak float64 `json:"hist_last_peak"`
	// HistOffset is the history basis' log-axis offset (bins).
	HistOffset float64 `json:"hist_offset"`
	// Alphas are the L2 penalties tried, in order, each fit starting from
	// the previous one's solution; each cell keeps the one with the lowest
	// validation NLL. The penalty is alpha/2 sum_i m_i w_i^2 over the filter
	// weights (not the bias), m_i the mean square of column i over the
	// training bins, so alpha is in units of training bins' worth of
	// standardised weight.
	Alphas []float64 `json:"alphas"`
	// HessianRows is how many weighted rows the Newton Hessian is built from
	// (systematic sampling by curvature weight); the gradient is always
	// exact, so this only affects the convergence rate. 0 uses every bin.
	HessianRows int `json:"hessian_rows"`
	// MaxIter bounds the Newton iterations per penalty.
	MaxIter int `json:"max_iter"`
	// Workers is the number of cells fitted in parallel (0: GOMAXPROCS).
	Workers int `json:"workers"`
}

// DefaultOptions returns the options of the shipped fit: a 36-bin latency,
// 9 stimulus bumps per LED peaking 36-246 bins back (filters 503 bins long),
// 10 history bumps peaking 1-121 bins back (filters 351 bins long): 47
// parameters per cell; penalties 1000, 100, 10 and 1; a Hessian from 20,000
// rows.
func DefaultOptions() Options {
	return Options{
		MinLag:       synth.MinLatencyBins,
		StimBases:    9,
		StimLastPeak: 210,
		StimOffset:   10,
		HistBases:    10,
		HistLastPeak: 120,
		HistOffset:   1,
		Alphas:       []float64{1000, 100, 10, 1},
		HessianRows:  20000,
		MaxIter:      60,
	}
}

// maxAlphas bounds the number of L2 penalties: each costs a full Newton
// fit per cell.
const maxAlphas = 1000

// bases checks the options and builds their stimulus and history bases.
// Every size (bump counts, peaks, offsets) is checked, and the bases'
// lengths bounded by the window, before a basis is allocated; errors name
// the options' JSON fields.
func (o *Options) bases() (stim, hist *Basis, err error) {
	if o.MinLag < 0 || o.MinLag >= rgc.WindowBins {
		return nil, nil, fmt.Errorf("glm: options.min_lag = %d, want 0..%d", o.MinLag, rgc.WindowBins-1)
	}
	if len(o.Alphas) == 0 {
		return nil, nil, errors.New("glm: options.alphas: no L2 penalties to try")
	}
	if len(o.Alphas) > maxAlphas {
		return nil, nil, fmt.Errorf("glm: options.alphas: %d L2 penalties, want at most %d", len(o.Alphas), maxAlphas)
	}
	for i, a := range o.Alphas {
		if !(a >= 0) || math.IsInf(a, 0) {
			return nil, nil, fmt.Errorf("glm: options.alphas[%d]: L2 penalty %g, want a finite value >= 0", i, a)
		}
	}
	if o.HessianRows < 0 || o.MaxIter < 1 || o.Workers < 0 {
		return nil, nil, fmt.Errorf("glm: options.hessian_rows = %d (hessian rows), max_iter = %d (max iter), workers = %d: want >= 0, >= 1, >= 0", o.HessianRows, o.MaxIter, o.Workers)
	}
	const maxFilter = rgc.WindowBins - rgc.Horizon
	stimLen, err := BasisLen(o.StimBases, o.MinLag, 0, o.StimLastPeak, o.StimOffset)
	if err != nil {
		return nil, nil, fmt.Errorf("glm: options.stim_bases = %d, stim_last_peak = %g, stim_offset = %g: stimulus %w", o.StimBases, o.StimLastPeak, o.StimOffset, err)
	}
	histLen, err := BasisLen(o.HistBases, 1, 0, o.HistLastPeak, o.HistOffset)
	if err != nil {
		return nil, nil, fmt.Errorf("glm: options.hist_bases = %d, hist_last_peak = %g, hist_offset = %g: history %w", o.HistBases, o.HistLastPeak, o.HistOffset, err)
	}
	if max(stimLen, histLen-1) > maxFilter {
		return nil, nil, fmt.Errorf("glm: options give filters of %d (stimulus) and %d (history) bins: they exceed the %d bins a window holds before its horizon", stimLen, histLen-1, maxFilter)
	}
	if stim, err = NewBasis(o.StimBases, o.MinLag, 0, o.StimLastPeak, o.StimOffset); err != nil {
		return nil, nil, fmt.Errorf("glm: stimulus %w", err)
	}
	if hist, err = NewBasis(o.HistBases, 1, 0, o.HistLastPeak, o.HistOffset); err != nil {
		return nil, nil, fmt.Errorf("glm: history %w", err)
	}
	return stim, hist, nil
}

// CellReport is one cell's fit.
type CellReport struct {
	// ClusterID is the cell's id.
	ClusterID int `json:"cluster_id"`
	// TrainSpikeBins is the number of training bins holding a spike.
	TrainSpikeBins int `json:"train_spike_bins"`
	// Alpha is the L2 penalty chosen on the validation split.
	Alpha float64 `json:"alpha"`
	// Iterations counts the Newton iterations over every penalty.
	Iterations int `json:"iterations"`
	// TrainNLL, ValNLL and TestNLL are the chosen fit's mean per-bin
	// negative log-likelihood (nats) of the spike indicator; TestNLL is 0
	// when the test split is empty.
	TrainNLL float64 `json:"train_nll"`
	ValNLL   float64 `json:"val_nll"`
	TestNLL  float64 `json:"test_nll"`
	// ConstValNLL is the validation per-bin NLL of a constant-rate model
	// fitted on the training split (a stimulus- and history-free baseline).
	ConstValNLL float64 `json:"const_val_nll"`
	// ValNLLByAlpha holds the validation per-bin NLL of each penalty tried.
	ValNLLByAlpha []float64 `json:"val_nll_by_alpha"`
	// Theta holds the fitted weights: the bias, then each LED's stimulus
	// bumps (LED-major), then the history bumps.
	Theta []float64 `json:"theta"`
}

// Report describes a fit.
type Report struct {
	// Options are the options used.
	Options Options `json:"options"`
	// Params is the number of parameters per cell.
	Params int `json:"params"`
	// StimBins and HistBins are the fitted filters' lengths.
	StimBins int `json:"stim_bins"`
	HistBins int `json:"hist_bins"`
	// Splits holds the bins [from, to) of train, val and test used.
	Splits [3][2]int `json:"splits"`
	// FrameLengths is the aligned stimulus' frame-length distribution (the
	// oracle's model of the frames to come).
	FrameLengths []synth.FrameLength `json:"frame_lengths"`
	// Cells holds one report per fitted cell, in the order asked for.
	Cells []CellReport `json:"cells"`
	// Seconds is the wall time of the fit.
	Seconds float64 `json:"seconds"`
}

// Fit fits the generalised linear model of rgc/synth (see the package
// documentation) to each cell of rec (indices into rec.Cells) by penalised
// maximum likelihood on the training split, choosing the L2 penalty on the
// validation split, and returns it as a synth.Truth whose oracle
// (synth.NewOracle on AlignedRaw) evaluates it exactly, with a report.
// rec.Raw must hold the recording's stimulus (rgc.Load sets it).
func Fit(ctx context.Context, rec *rgc.Recording, cells []int, opts Options) (*synth.Truth, *Report, error) {
	start := time.Now()
	if rec == nil || rec.Raw == nil {
		return nil, nil, errors.New("glm: no recording (or a recording without its raw stimulus)")
	}
	if len(cells) == 0 {
		return nil, nil, fmt.Errorf("glm: no cells to fit in %s", rec.Name)
	}
	seen := map[int]bool{}
	for _, c := range cells {
		if c < 0 || c >= len(rec.Cells) {
			return nil, nil, fmt.Errorf("glm: cell index %d out of range (recording %s has %d cells)", c, rec.Name, len(rec.Cells))
		}
		if seen[c] {
			return nil, nil, fmt.Errorf("glm: cell index %d (cluster %d) listed twice", c, rec.Cells[c].ClusterID)
		}
		seen[c] = true
	}
	sb, hb, err := opts.bases()
	if err != nil {
		return nil, nil, err
	}
	fr, err := AlignFrames(rec.Raw)
	if err != nil {
		return nil, nil, fmt.Errorf("glm: %w", err)
	}
	n := min(rec.Bins, fr.End())
	var splits [3][2]int
	for s := rgc.Train; s <= rgc.Test; s++ {
		from, to := rec.SplitRange(s)
		splits[s] = [2]int{min(from, n), min(to, n)}
	}
	if tr := splits[rgc.Train]; tr[1]-tr[0] < sb.Len {
		return nil, nil, fmt.Errorf("glm: the training split of %s has %d stimulus bins, fewer than the %d-bin stimulus filter", rec.Name, tr[1]-tr[0], sb.Len)
	}
	if va := splits[rgc.Val]; va[1] <= va[0] && len(opts.Alphas) > 1 {
		return nil, nil, fmt.Errorf("glm: the validation split of %s is empty: cannot choose among %d penalties", rec.Name, len(opts.Alphas))
	}
	workers := opts.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("glm: %w", err)
	}
	d := &design{stim: stimDesign(fr, sb, n, workers), ns: rgc.StimChannels * len(sb.Rows), nh: len(hb.Rows), n: n, hb: hb, splits: splits}
	d.p = 1 + d.ns + d.nh
	// Mean squares of the stimulus columns over the training bins.
	d.stimMS = make([]float64, d.ns)
	tr := splits[rgc.Train]
	for u := tr[0]; u < tr[1]; u++ {
		for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
			d.stimMS[k] += float64(v) * float64(v)
		}
	}
	for k := range d.stimMS {
		d.stimMS[k] /= float64(tr[1] - tr[0])
	}

	rep := &Report{Options: opts, Params: d.p, StimBins: sb.Len, HistBins: hb.Len - 1, Splits: splits, Cells: make([]CellReport, len(cells))}
	thetas := make([][]float64, len(cells))
	errs := make([]error, len(cells))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(workers, len(cells)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cf := newCellFit(d, &opts)
			for j := range jobs {
				if err := ctx.Err(); err != nil {
					errs[j] = err
					continue
				}
				c := &rec.Cells[cells[j]]
				th, cr, err := cf.fit(ctx, c)
				if err != nil {
					errs[j] = fmt.Errorf("cluster %d: %w", c.ClusterID, err)
					continue
				}
				thetas[j], rep.Cells[j] = th, *cr
			}
		}()
	}
	for j := range cells {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("glm: %w", err)
	}
	for _, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("glm: %w", err)
		}
	}

	lens, probs := fr.FrameLengths()
	for i, l := range lens {
		rep.FrameLengths = append(rep.FrameLengths, synth.FrameLength{Bins: l, Prob: probs[i]})
	}
	for j := range cells {
		rep.Cells[j].Theta = thetas[j]
	}
	truth, err := rep.Truth()
	if err != nil {
		return nil, nil, err
	}
	rep.Seconds = time.Since(start).Seconds()
	return truth, rep, nil
}

// Truth expands the report's fitted weights into the synth.Truth that Fit
// returns: each filter is the weighted sum of the options' basis. A report
// saved as JSON is thus a compact form of the fitted model (about 50
// numbers per cell instead of 2,400 filter taps).
func (r *Report) Truth() (*synth.Truth, error) {
	sb, hb, err := r.Options.bases()
	if err != nil {
		return nil, err
	}
	if err := r.check(sb, hb); err != nil {
		return nil, err
	}
	nb := len(sb.Rows)
	tr := r.Splits[rgc.Train]
	truth := &synth.Truth{BinRateHz: rgc.BinRateHz, FrameLengths: r.FrameLengths}
	for _, c := range r.Cells {
		th := c.Theta
		cp := synth.CellParams{ClusterID: c.ClusterID, Type: "glm", Bias: th[0]}
		if tr[1] > tr[0] {
			cp.NominalRateHz = float64(c.TrainSpikeBins) / (float64(tr[1]-tr[0]) / rgc.BinRateHz)
		}
		for ch := range cp.StimFilter {
			cp.StimFilter[ch] = sb.Filter(th[1+ch*nb : 1+(ch+1)*nb])
		}
		cp.HistFilter = hb.Filter(th[1+rgc.StimChannels*nb:])[1:]
		truth.Cells = append(truth.Cells, cp)
	}
	if err := truth.Validate(); err != nil {
		return nil, fmt.Errorf("glm: fitted %w", err)
	}
	return truth, nil
}

// check checks the report's fields against each other and against the
// options' bases sb and hb: the parameter count and filter lengths the
// bases give, ordered non-negative splits, and for every cell a training
// spike count within its split, a finite penalty >= 0, one validation NLL
// per penalty and one finite weight per parameter. (The reported NLLs do
// not enter the truth and JSON cannot carry non-finite numbers.) Errors
// name the JSON field.
func (r *Report) check(sb, hb *Basis) error {
	p := 1 + rgc.StimChannels*len(sb.Rows) + len(hb.Rows)
	if r.Params != p {
		return fmt.Errorf("glm: params = %d, the options' bases give %d", r.Params, p)
	}
	if r.StimBins != sb.Len || r.HistBins != hb.Len-1 {
		return fmt.Errorf("glm: stim_bins = %d and hist_bins = %d, the options' bases give %d and %d", r.StimBins, r.HistBins, sb.Len, hb.Len-1)
	}
	prev := 0
	for s, sp := range r.Splits {
		if sp[0] < prev || sp[1] < sp[0] {
			return fmt.Errorf("glm: splits[%d] = %v, want ordered, non-negative and not overlapping the split before", s, sp)
		}
		prev = sp[1]
	}
	if !finite(r.Seconds) || r.Seconds < 0 {
		return fmt.Errorf("glm: seconds = %g, want a finite value >= 0", r.Seconds)
	}
	ntr := r.Splits[rgc.Train][1] - r.Splits[rgc.Train][0]
	for j := range r.Cells {
		c := &r.Cells[j]
		if c.TrainSpikeBins < 0 || c.TrainSpikeBins > ntr {
			return fmt.Errorf("glm: cells[%d] (cluster %d): train_spike_bins = %d, want 0..%d (the training split's bins)", j, c.ClusterID, c.TrainSpikeBins, ntr)
		}
		if c.Iterations < 0 {
			return fmt.Errorf("glm: cells[%d] (cluster %d): iterations = %d is negative", j, c.ClusterID, c.Iterations)
		}
		if !finite(c.Alpha) || c.Alpha < 0 {
			return fmt.Errorf("glm: cells[%d] (cluster %d): alpha = %g, want a finite value >= 0", j, c.ClusterID, c.Alpha)
		}
		if len(c.ValNLLByAlpha) != len(r.Options.Alphas) {
			return fmt.Errorf("glm: cells[%d] (cluster %d): val_nll_by_alpha has %d entries for %d options.alphas", j, c.ClusterID, len(c.ValNLLByAlpha), len(r.Options.Alphas))
		}
		if len(c.Theta) != p {
			return fmt.Errorf("glm: cells[%d] (cluster %d): theta has %d weights, the options' bases need %d", j, c.ClusterID, len(c.Theta), p)
		}
		for i, v := range c.Theta {
			if !finite(v) {
				return fmt.Errorf("glm: cells[%d] (cluster %d): theta[%d] = %g is not finite", j, c.ClusterID, i, v)
			}
		}
	}
	return nil
}

// design holds what every cell's fit shares.
type design struct {
	stim   []float32 // n rows of ns stimulus columns
	stimMS []float64 // mean square of each stimulus column over train
	ns, nh int       // stimulus and history columns
	p      int       // parameters: bias, stimulus, history
	n      int       // bins
	hb     *Basis
	splits [3][2]int
}

// cellFit holds one worker's buffers.
type cellFit struct {
	d    *design
	opts *Options
	hist []float32 // n rows of nh history columns
	y    []bool
	eta  []float64 // linear predictor over the training bins
	etaT []float64 // at a trial point
	w    []float64 // curvature weights over the training bins
	x    []float64 // one row
	hess []float64 // p x p, upper triangle used
	grad []float64
	ms   []float64 // penalty weights m_i (0 for the bias)
}

func newCellFit(d *design, opts *Options) *cellFit {
	ntr := d.splits[rgc.Train][1] - d.splits[rgc.Train][0]
	return &cellFit{
		d: d, opts: opts,
		hist: make([]float32, d.n*d.nh),
		eta:  make([]float64, ntr), etaT: make([]float64, ntr), w: make([]float64, ntr),
		x: make([]float64, d.p), hess: make([]float64, d.p*d.p), grad: make([]float64, d.p),
		ms: make([]float64, d.p),
	}
}

// row writes bin u's design row to cf.x.
func (cf *cellFit) row(u int) {
	d := cf.d
	cf.x[0] = 1
	for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
		cf.x[1+k] = float64(v)
	}
	for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
		cf.x[1+d.ns+k] = float64(v)
	}
}

// linear writes theta . x_u for bins lo..hi-1 to eta.
func (cf *cellFit) linear(theta []float64, lo, hi int, eta []float64) {
	d := cf.d
	ws, wh := theta[1:1+d.ns], theta[1+d.ns:]
	for u := lo; u < hi; u++ {
		s := theta[0]
		for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
			s += ws[k] * float64(v)
		}
		for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
			s += wh[k] * float64(v)
		}
		eta[u-lo] = s
	}
}

// binNLL returns the negative log-likelihood of a bin with log intensity
// eta: a spike (at least one event of a Poisson process of rate
// lambda = exp(eta) in the bin) has probability 1 - exp(-lambda).
func binNLL(eta float64, spike bool) float64 {
	lam := math.Exp(eta)
	if spike {
		return -math.Log(-math.Expm1(-lam))
	}
	return lam
}

// binDeriv returns the first and second derivatives of binNLL in eta. Both
// the spike and the no-spike term are convex in eta (the complementary
// log-log link), so the penalised loss is convex.
func binDeriv(eta float64, spike bool) (g, h float64) {
	lam := math.Exp(eta)
	if !spike {
		return lam, lam
	}
	switch {
	case lam < 1e-8:
		return -1 + lam/2, lam / 2
	case lam > 40:
		e := math.Exp(-lam)
		return -lam * e, lam * lam * e
	}
	em := math.Expm1(lam)
	g = -lam / em
	h = lam * (lam*math.Exp(lam) - em) / (em * em)
	return g, h
}

// loss returns the penalised training loss at theta, its linear predictor
// written to eta.
func (cf *cellFit) loss(theta []float64, alpha float64, eta []float64) float64 {
	tr := cf.d.splits[rgc.Train]
	cf.linear(theta, tr[0], tr[1], eta)
	s := 0.0
	for i, e := range eta {
		s += binNLL(e, cf.y[tr[0]+i])
	}
	for k := 1; k < len(theta); k++ {
		s += alpha / 2 * cf.ms[k] * theta[k] * theta[k]
	}
	return s
}

// meanNLL returns the mean per-bin NLL of theta over split s (0 if empty).
func (cf *cellFit) meanNLL(theta []float64, s rgc.Split) float64 {
	r := cf.d.splits[s]
	if r[1] <= r[0] {
		return 0
	}
	sum := 0.0
	d := cf.d
	for u := r[0]; u < r[1]; u++ {
		e := theta[0]
		for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
			e += theta[1+k] * float64(v)
		}
		for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
			e += theta[1+d.ns+k] * float64(v)
		}
		sum += binNLL(e, cf.y[u])
	}
	return sum / float64(r[1]-r[0])
}

// fit fits one cell over every penalty and keeps the best on validation.
func (cf *cellFit) fit(ctx context.Context, c *rgc.Cell) ([]float64, *CellReport, error) {
	d := cf.d
	cf.y = spikeIndicator(c.SpikeBins, d.n)
	tr := d.splits[rgc.Train]
	spikes := 0
	for _, s := range cf.y[tr[0]:tr[1]] {
		if s {
			spikes++
		}
	}
	if spikes == 0 {
		return nil, nil, fmt.Errorf("no spike in the training split (bins %d..%d)", tr[0], tr[1]-1)
	}
	histDesign(cf.y, d.hb, cf.hist)
	copy(cf.ms[1:], d.stimMS)
	for k := 0; k < d.nh; k++ {
		m := 0.0
		for u := tr[0]; u < tr[1]; u++ {
			v := float64(cf.hist[u*d.nh+k])
			m += v * v
		}
		cf.ms[1+d.ns+k] = m / float64(tr[1]-tr[0])
	}
	for k := 1; k < d.p; k++ {
		if cf.ms[k] == 0 {
			cf.ms[k] = 1 // a column that is zero on train: keep its weight at 0
		}
	}

	rep := &CellReport{ClusterID: c.ClusterID, TrainSpikeBins: spikes}
	ntr := float64(tr[1] - tr[0])
	pc := float64(spikes) / ntr
	lam := -math.Log1p(-pc)
	theta := make([]float64, d.p)
	theta[0] = math.Log(lam)
	if va := d.splits[rgc.Val]; va[1] > va[0] {
		sum := 0.0
		for u := va[0]; u < va[1]; u++ {
			sum += binNLL(theta[0], cf.y[u])
		}
		rep.ConstValNLL = sum / float64(va[1]-va[0])
	}
	var best []float64
	bestVal := math.Inf(1)
	for _, alpha := range cf.opts.Alphas {
		it, err := cf.newton(ctx, theta, alpha)
		rep.Iterations += it
		if err != nil {
			return nil, nil, err
		}
		v := cf.meanNLL(theta, rgc.Val)
		rep.ValNLLByAlpha = append(rep.ValNLLByAlpha, v)
		if best == nil || v < bestVal {
			best, bestVal, rep.Alpha = append([]float64(nil), theta...), v, alpha
		}
	}
	rep.ValNLL = bestVal
	rep.TrainNLL = cf.meanNLL(best, rgc.Train)
	rep.TestNLL = cf.meanNLL(best, rgc.Test)
	return best, rep, nil
}

// newtonTol is the Newton decrement (the predicted loss decrease, total
// nats over the training bins) below which a fit has converged.
const newtonTol = 1e-4

// newton minimises the penalised loss from theta (updated in place) by
// damped Newton steps with an exact gradient and a Hessian from
// curvature-weighted systematic sampling of the bins, returning the number
// of iterations.
func (cf *cellFit) newton(ctx context.Context, theta []float64, alpha float64) (int, error) {
	d := cf.d
	p := d.p
	tr := d.splits[rgc.Train]
	cur := cf.loss(theta, alpha, cf.eta)
	trial := make([]float64, p)
	step := make([]float64, p)
	for it := 0; it < cf.opts.MaxIter; it++ {
		if err := ctx.Err(); err != nil {
			return it, err
		}
		// Gradient (exact) and curvature weights.
		clear(cf.grad)
		gs, gh := cf.grad[1:1+d.ns], cf.grad[1+d.ns:]
		sumW := 0.0
		for i, e := range cf.eta {
			u := tr[0] + i
			g, h := binDeriv(e, cf.y[u])
			cf.w[i] = h
			sumW += h
			cf.grad[0] += g
			for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
				gs[k] += g * float64(v)
			}
			for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
				gh[k] += g * float64(v)
			}
		}
		for k := 1; k < p; k++ {
			cf.grad[k] += alpha * cf.ms[k] * theta[k]
		}
		// Hessian: every bin whose weight reaches tau, the others by
		// systematic sampling with weight tau (unbiased in expectation).
		clear(cf.hess)
		tau := 0.0
		if rows := cf.opts.HessianRows; rows > 0 && rows < len(cf.w) {
			tau = sumW / float64(rows)
		}
		acc := tau / 2
		for i, h := range cf.w {
			wt := h
			if h < tau {
				acc += h
				if acc < tau {
					continue
				}
				acc -= tau
				wt = tau
			}
			if wt == 0 {
				continue
			}
			cf.row(tr[0] + i)
			for a := 0; a < p; a++ {
				xa := wt * cf.x[a]
				if xa == 0 {
					continue
				}
				hr := cf.hess[a*p : (a+1)*p]
				for b := a; b < p; b++ {
					hr[b] += xa * cf.x[b]
				}
			}
		}
		for k := 1; k < p; k++ {
			cf.hess[k*p+k] += alpha * cf.ms[k]
		}
		if err := solveSym(cf.hess, cf.grad, step, p); err != nil {
			return it, err
		}
		dec := 0.0 // -grad . step, step = -H^-1 grad
		for k := range step {
			step[k] = -step[k]
			dec -= cf.grad[k] * step[k]
		}
		if !(dec > 2*newtonTol) {
			return it, nil
		}
		// Backtracking line search (Armijo).
		t := 1.0
		accepted := false
		for ls := 0; ls < 40; ls++ {
			for k := range trial {
				trial[k] = theta[k] + t*step[k]
			}
			l := cf.loss(trial, alpha, cf.etaT)
			if l <= cur-1e-4*t*dec {
				copy(theta, trial)
				cf.eta, cf.etaT = cf.etaT, cf.eta
				improved := cur - l
				cur = l
				accepted = true
				if improved < newtonTol {
					return it + 1, nil
				}
				break
			}
			t /= 2
		}
		if !accepted {
			return it + 1, nil // no further decrease within rounding
		}
	}
	return cf.opts.MaxIter, nil
}

// solveSym solves H x = g for the symmetric positive definite p x p matrix
// whose upper triangle is in h, by Cholesky factorisation; a factorisation
// that fails (rounding) is retried with a small ridge.
func solveSym(h, g, x []float64, p int) error {
	a := mat.NewSymDense(p, nil)
	tr := 0.0
	for i := 0; i < p; i++ {
		for j := i; j < p; j++ {
			a.SetSym(i, j, h[i*p+j])
		}
		tr += h[i*p+i]
	}
	var ch mat.Cholesky
	for ridge := 0.0; ridge < tr; ridge = max(ridge*100, 1e-12*tr/float64(p)) {
		if ridge > 0 {
			for i := 0; i < p; i++ {
				a.SetSym(i, i, h[i*p+i]+ridge)
			}
		}
		if ch.Factorize(a) {
			out := mat.NewVecDense(p, x)
			if err := ch.SolveVecTo(out, mat.NewVecDense(p, g)); err != nil && !errors.As(err, new(mat.Condition)) {
				return fmt.Errorf("newton step: %w", err)
			}
			return nil
		}
	}
	return errors.New("newton step: the Hessian is not positive definite")
}
