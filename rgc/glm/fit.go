package glm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

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
		return nil, nil, fmt.Errorf("glm: options.hessian_rows = %d (hessian rows), max_iter = %d (max iter), workers = %d: "+
			"want >= 0, >= 1, >= 0", o.HessianRows, o.MaxIter, o.Workers)
	}
	const maxFilter = rgc.WindowBins - rgc.Horizon
	stimLen, err := BasisLen(o.StimBases, o.MinLag, 0, o.StimLastPeak, o.StimOffset)
	if err != nil {
		return nil, nil, fmt.Errorf("glm: options.stim_bases = %d, stim_last_peak = %g, stim_offset = %g: stimulus %w",
			o.StimBases, o.StimLastPeak, o.StimOffset, err)
	}
	histLen, err := BasisLen(o.HistBases, 1, 0, o.HistLastPeak, o.HistOffset)
	if err != nil {
		return nil, nil, fmt.Errorf("glm: options.hist_bases = %d, hist_last_peak = %g, hist_offset = %g: history %w",
			o.HistBases, o.HistLastPeak, o.HistOffset, err)
	}
	if max(stimLen, histLen-1) > maxFilter {
		return nil, nil, fmt.Errorf("glm: options give filters of %d (stimulus) and %d (history) bins: they exceed the %d bins a window "+
			"holds before its horizon",
			stimLen, histLen-1, maxFilter)
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
		return nil, nil, fmt.Errorf("glm: the training split of %s has %d stimulus bins, fewer than the %d-bin stimulus filter",
			rec.Name, tr[1]-tr[0], sb.Len)
	}
	if va := splits[rgc.Val]; va[1] <= va[0] && len(opts.Alphas) > 1 {
		return nil, nil, fmt.Errorf("glm: the validation split of %s is empty: cannot choose among %d penalties",
			rec.Name, len(opts.Alphas))
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
		return fmt.Errorf("glm: stim_bins = %d and hist_bins = %d, the options' bases give %d and %d",
			r.StimBins, r.HistBins, sb.Len, hb.Len-1)
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
			return fmt.Errorf("glm: cells[%d] (cluster %d): train_spike_bins = %d, want 0..%d (the training split's bins)",
				j, c.ClusterID, c.TrainSpikeBins, ntr)
		}
		if c.Iterations < 0 {
			return fmt.Errorf("glm: cells[%d] (cluster %d): iterations = %d is negative", j, c.ClusterID, c.Iterations)
		}
		if !finite(c.Alpha) || c.Alpha < 0 {
			return fmt.Errorf("glm: cells[%d] (cluster %d): alpha = %g, want a finite value >= 0", j, c.ClusterID, c.Alpha)
		}
		if len(c.ValNLLByAlpha) != len(r.Options.Alphas) {
			return fmt.Errorf("glm: cells[%d] (cluster %d): val_nll_by_alpha has %d entries for %d options.alphas",
				j, c.ClusterID, len(c.ValNLLByAlpha), len(r.Options.Alphas))
		}
		if len(c.Theta) != p {
			return fmt.Errorf("glm: cells[%d] (cluster %d): theta has %d weights, the options' bases need %d",
				j, c.ClusterID, len(c.Theta), p)
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
