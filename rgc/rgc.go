// Package rgc holds retinal ganglion cell recordings in the model's time base:
// loading multi-electrode-array (MEA) recordings, cutting them into the
// windows the model learns from, and the Predictor interface that every
// next-spike predictor (neural engine, synthetic oracle, zero-input baseline)
// implements.
//
// The task and its time base follow docs/model.md (Doran & Baden,
// "Categorical Distributions are Effective Neural Network Outputs for Event
// Prediction"; Doran et al., ICML 2024): bins at 991.82 Hz, a 5 x 1024 input
// window ending at bin t, and 81 classes for the next spike after t.
package rgc

import (
	"fmt"
	"time"
)

// Time base and window geometry shared by every package.
const (
	// SensorRateHz is the MEA sensor sample rate of the reference recordings.
	SensorRateHz = 17852.76785
	// Decimation is the number of sensor samples per model bin.
	Decimation = 18
	// BinRateHz is the model's bin rate (about 991.82 Hz).
	BinRateHz = SensorRateHz / Decimation
	// BinMs is the length of one bin in milliseconds (about 1.0082 ms).
	BinMs = 1000 / BinRateHz

	// StimChannels is the number of LED channels (red, green, blue, UV).
	StimChannels = 4
	// InputRows is the number of rows of a window: the stimulus channels and
	// the spike history.
	InputRows = StimChannels + 1
	// SpikeRow is the index of the spike-history row in a window.
	SpikeRow = StimChannels
	// WindowBins is the length of a window in bins.
	WindowBins = 1024
	// Horizon is the prediction period in bins: classes 0..Horizon-1 place the
	// next spike in bins t+1..t+Horizon, class Horizon means none of them.
	Horizon = 80
	// NumClasses is the number of output classes (Horizon + 1).
	NumClasses = Horizon + 1
	// NoSpikeClass is the class for "no spike in the next Horizon bins".
	NoSpikeClass = Horizon
	// WindowLen is the number of floats of one window: InputRows x WindowBins,
	// row-major (row r, bin j at r*WindowBins + j; bin WindowBins-1 is t).
	WindowLen = InputRows * WindowBins
)

// Batch is a set of windows to predict, each for one cell.
type Batch struct {
	// Inputs holds Len() windows back to back, each WindowLen floats laid out
	// as documented on WindowLen.
	Inputs []float32
	// Cells holds each window's cell, as the recording's cluster id.
	Cells []int
	// Ends holds the bin index t of each window's last bin, in the time base
	// of the stream the windows come from (recording bin, or frame sequence
	// number in the daemon). Predictors that only look at the window ignore it.
	Ends []int
}

// Len returns the number of windows in the batch.
func (b *Batch) Len() int { return len(b.Cells) }

// Check reports whether the batch's slices agree in length.
func (b *Batch) Check() error {
	n := len(b.Cells)
	if len(b.Inputs) != n*WindowLen {
		return fmt.Errorf("batch: %d inputs floats for %d windows, want %d", len(b.Inputs), n, n*WindowLen)
	}
	if len(b.Ends) != n {
		return fmt.Errorf("batch: %d ends for %d windows", len(b.Ends), n)
	}
	return nil
}

// Predictor computes next-spike distributions: for window i of the batch it
// writes the NumClasses class probabilities (summing to 1) to
// out[i*NumClasses : (i+1)*NumClasses]. out has at least b.Len()*NumClasses
// elements. A cell the predictor does not know is an error. Implementations
// need not be safe for concurrent use.
type Predictor interface {
	// Predict fills out with the class probabilities of every window of b.
	Predict(b *Batch, out []float32) error
}

// Expecter is implemented by predictors that can prepare for a call they
// are told of ahead (the CPU engine keeps its helper threads polling): a
// caller that knows n windows fall due within d calls Expect(n, d). Expect
// returns at once and must be safe to call concurrently with Predict; a
// call that does not come costs the predictor at most d of preparation.
// It is optional: callers check for it with a type assertion.
type Expecter interface {
	Expect(n int, d time.Duration)
}

// Progressive is implemented by predictors that can hand a call's windows
// over as they are computed (the CPU engine, whose threads finish a batch's
// windows one after another; the GPU engine, a chunk of windows at a
// time): a caller that acts on each window's output
// (the daemon publishes its decision) need not wait for the whole batch.
// It is optional: callers check for it with a type assertion.
type Progressive interface {
	// PredictEach is Predict that may also call done(n), on the calling
	// goroutine and before it returns, once windows 0..n-1 of b have
	// their final probabilities in out. Successive calls report a growing
	// n. Windows not reported when PredictEach returns nil are final
	// then; when it returns an error, only the reported windows are.
	PredictEach(b *Batch, out []float32, done func(n int)) error
}
