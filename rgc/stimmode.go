package rgc

import (
	"fmt"
)

// StimMode is how BinStimulus turns the LEDs' step functions into one value
// per bin. It is part of a loaded Recording and of every checkpoint: a
// model reads the stimulus only in the mode it was trained on.
type StimMode uint8

const (
	// StimCausal, the default, gives each LED's on-fraction over the bin's
	// own Decimation sensor samples: bin b depends only on samples 18b to
	// 18b+17, nothing after its end. It is the input a prosthesis has.
	StimCausal StimMode = iota
	// StimZeroPhase low-pass filters the step functions with a zero-phase
	// windowed sinc reaching 16 bins ahead and samples each bin's centre, as
	// the reference pipeline does (retinapy's mea.downsample_stimulus, scipy
	// decimate). It is not causal: bin b sees LED edges up to 16 bins after
	// it.
	StimZeroPhase
)

// stimModeNames are the modes' names on flags, in files and in errors.
var stimModeNames = [...]string{StimCausal: "causal", StimZeroPhase: "zero-phase"}

// String returns the mode's name: "causal" or "zero-phase".
func (m StimMode) String() string {
	if int(m) < len(stimModeNames) {
		return stimModeNames[m]
	}
	return fmt.Sprintf("StimMode(%d)", uint8(m))
}

// Describe returns the mode's name with whether it is causal, for errors
// and reports.
func (m StimMode) Describe() string {
	switch m {
	case StimCausal:
		return "causal (each bin from its own samples)"
	case StimZeroPhase:
		return "zero-phase (non-causal, sees 16 bins ahead)"
	}
	return m.String()
}

// ParseStimMode returns the mode named s ("causal" or "zero-phase").
func ParseStimMode(s string) (StimMode, error) {
	for m, n := range stimModeNames {
		if s == n {
			return StimMode(m), nil
		}
	}
	return 0, fmt.Errorf("stimulus mode %q: want causal or zero-phase", s)
}

// MarshalText implements encoding.TextMarshaler with the mode's name.
func (m StimMode) MarshalText() ([]byte, error) {
	if int(m) >= len(stimModeNames) {
		return nil, fmt.Errorf("unknown stimulus mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler (ParseStimMode); it
// makes StimMode usable with flag.TextVar.
func (m *StimMode) UnmarshalText(b []byte) error {
	v, err := ParseStimMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// CheckStimMode reports an error naming both modes when a model trained on
// stimulus mode model is given input binned in mode input: its weights read
// the other input wrongly, with no error anywhere else.
func CheckStimMode(model, input StimMode) error {
	if model != input {
		return fmt.Errorf("stimulus mode mismatch: the model was trained on %s bins, the input is %s bins; use data or a model of the same mode (--stim)", model.Describe(), input.Describe())
	}
	return nil
}

// binCausal returns each LED's on-fraction over each bin's own Decimation
// sensor samples: exactly the mean of the step function (see BinStimulus)
// over samples [18b, 18b+18), so in [0, 1] and exactly 0 or 1 away from
// edges. Counts of on samples are summed as whole numbers and divided once,
// so a bin that is on throughout reads exactly 1.
func binCausal(pattern [][StimChannels]int8, triggers []int64, nf, bins int, out *[StimChannels][]float32) {
	end := int64(bins) * Decimation
	for f := 0; f < nf; f++ {
		s, e := max(triggers[f], 0), min(triggers[f+1], end)
		for n := s; n < e; {
			b := n / Decimation
			next := min((b+1)*Decimation, e)
			for c := range out {
				if pattern[f][c] != 0 {
					out[c][b] += float32(next - n)
				}
			}
			n = next
		}
	}
	for c := range out {
		for b := range out[c] {
			out[c][b] /= Decimation
		}
	}
}
