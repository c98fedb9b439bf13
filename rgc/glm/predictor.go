package glm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
)

var _ rgc.Predictor = (*Predictor)(nil)

// Predictor is the exact next-spike predictor of a fitted GLM on a real
// recording: rgc/synth's oracle of the fitted truth on the recording's
// bin-aligned stimulus (AlignedRaw), marginalising over the frames not yet
// shown. The oracle checks each window's last stimulus column against the
// binned stimulus of the recording it was built from; the real recording's
// triggers fall inside bins, so its binned stimulus differs from the aligned
// one near switches. Predict therefore checks the window against the real
// recording itself and hands the oracle a copy whose last stimulus column
// is the aligned recording's. The oracle reads nothing else of the stimulus
// rows. Not safe for concurrent use.
type Predictor struct {
	o       *synth.Oracle
	real    [rgc.StimChannels][]float32 // the recording's binned stimulus
	aligned [rgc.StimChannels][]float32 // the aligned recording's
	b       rgc.Batch                   // scratch copy of a batch
}

// NewPredictor builds the predictor of truth (every cell of which must be a
// cell of rec) on recording rec.
func NewPredictor(rec *rgc.Recording, truth *synth.Truth) (*Predictor, error) {
	if rec.Raw == nil {
		return nil, fmt.Errorf("glm predictor: recording %s has no raw stimulus", rec.Name)
	}
	al, err := AlignedRaw(rec.Raw, truth.ClusterIDs())
	if err != nil {
		return nil, fmt.Errorf("glm predictor: %w", err)
	}
	o, err := synth.NewOracle(al, truth)
	if err != nil {
		return nil, fmt.Errorf("glm predictor: %w", err)
	}
	o.SetStimMode(rec.StimMode)
	return &Predictor{
		o:       o,
		real:    rec.Stimulus,
		aligned: rgc.BinStimulus(rec.StimMode, al.Pattern, al.Triggers, al.NumSamples),
	}, nil
}

// Oracle returns the underlying oracle (its Probs gives the class
// probabilities from a spike list, without windows).
func (p *Predictor) Oracle() *synth.Oracle { return p.o }

// stimTolerance is how far a window's last stimulus column may differ from
// the recording's binned stimulus.
const stimTolerance = 1e-3

// Predict implements rgc.Predictor. b.Ends must be recording bins.
func (p *Predictor) Predict(b *rgc.Batch, out []float32) error {
	if err := b.Check(); err != nil {
		return fmt.Errorf("glm predictor: %w", err)
	}
	n := b.Len()
	if cap(p.b.Inputs) < len(b.Inputs) {
		p.b.Inputs = make([]float32, len(b.Inputs))
	}
	p.b.Inputs = p.b.Inputs[:len(b.Inputs)]
	copy(p.b.Inputs, b.Inputs)
	p.b.Cells, p.b.Ends = b.Cells, b.Ends
	for i := 0; i < n; i++ {
		t := b.Ends[i]
		if t < 0 || t >= len(p.real[0]) {
			return fmt.Errorf("glm predictor: window %d (cluster %d) ends at bin %d, outside the recording [0, %d)", i, b.Cells[i], t, len(p.real[0]))
		}
		win := p.b.Inputs[i*rgc.WindowLen:][:rgc.WindowLen]
		for c := range p.real {
			k := c*rgc.WindowBins + rgc.WindowBins - 1
			if got, want := win[k], p.real[c][t]; math.Abs(float64(got-want)) > stimTolerance {
				return fmt.Errorf("glm predictor: window %d (cluster %d): LED %d reads %g at its last bin but the recording has %g at end bin %d: the window's stimulus does not come from this recording at b.Ends", i, b.Cells[i], c, got, want, t)
			}
			win[k] = p.aligned[c][t]
		}
	}
	if err := p.o.Predict(&p.b, out); err != nil {
		return fmt.Errorf("glm predictor: %w", err)
	}
	return nil
}

// NewWindowPredictor builds the fitted GLM's predictor that reads
// everything from the windows, as a deployed model must: the stimulus
// frames decoded from the window's causal bins, the current frame's start
// marginalised where a switch to the same pattern may have hidden it
// (synth.NewWindowOracle). It needs no recording and ignores b.Ends; it
// equals Predictor wherever no such switch can have fallen in the current
// frame. The windows must be binned rgc.StimCausal; the caller checks.
func NewWindowPredictor(truth *synth.Truth) (rgc.Predictor, error) {
	o, err := synth.NewWindowOracle(truth)
	if err != nil {
		return nil, fmt.Errorf("glm window predictor: %w", err)
	}
	return o, nil
}

// SaveTruth writes a fitted truth as indented JSON (the format of
// rgc/synth's truth.json) to path.
func SaveTruth(path string, tr *synth.Truth) error {
	data, err := json.MarshalIndent(tr, "", " ")
	if err != nil {
		return fmt.Errorf("save glm %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("save glm: %w", err)
	}
	return nil
}

// LoadTruth reads a fitted model: either a truth written by SaveTruth (or
// a synthetic recording's truth.json) or a Report written as JSON (`trainer
// glm --report`, the compact form), which is expanded with Report.Truth.
// The file may hold at most synth.MaxTruthBytes; every size and count it
// gives (bases, frame lengths, weights) is checked before anything sized by
// it is allocated, and the truth is validated.
func LoadTruth(path string) (*synth.Truth, error) {
	data, err := synth.ReadTruthFile(path)
	if err != nil {
		return nil, fmt.Errorf("load glm: %w", err)
	}
	return decodeTruth(path, data)
}

// decodeTruth decodes and validates the content of a GLM file (a truth or
// a report, see LoadTruth); errors name path.
func decodeTruth(path string, data []byte) (*synth.Truth, error) {
	var probe struct {
		Options json.RawMessage `json:"options"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("load glm %s: not a GLM file (the JSON that trainer glm writes): %w", path, err)
	}
	var tr *synth.Truth
	if probe.Options != nil {
		var rep Report
		if err := decodeStrict(data, &rep); err != nil {
			return nil, fmt.Errorf("load glm report %s: %w", path, err)
		}
		t, err := rep.Truth()
		if err != nil {
			return nil, fmt.Errorf("load glm report %s: %w", path, err)
		}
		tr = t
	} else {
		tr = new(synth.Truth)
		if err := decodeStrict(data, tr); err != nil {
			return nil, fmt.Errorf("load glm %s: %w", path, err)
		}
	}
	if err := tr.Validate(); err != nil {
		return nil, fmt.Errorf("load glm %s: %w", path, err)
	}
	return tr, nil
}

// decodeStrict decodes one JSON object with no unknown fields and nothing
// after it.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}
