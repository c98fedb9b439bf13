package rollout

import (
	"encoding/json"
	"fmt"
	"os"
)

// ThresholdFile is the JSON form of a fitted threshold policy.
type ThresholdFile struct {
	// Checkpoint is the model the thresholds were fitted for.
	Checkpoint string `json:"checkpoint"`
	// Recording and Split name the data they were fitted on.
	Recording string `json:"recording"`
	Split     string `json:"split"`
	// Bins is the length of the fitted stretch.
	Bins int `json:"bins"`
	// Cells holds one entry per cell.
	Cells []ThresholdCell `json:"cells"`
}

// ThresholdCell is one cell's fitted threshold.
type ThresholdCell struct {
	// ID is the cluster id.
	ID int `json:"id"`
	// Threshold is the fitted threshold on P(spike within the period).
	Threshold float64 `json:"threshold"`
	// Recorded and Generated are the spike counts of the recording and of
	// the rollout with the threshold over the fitted stretch.
	Recorded  int `json:"recorded"`
	Generated int `json:"generated"`
	// Matched says whether Generated is within the fit's tolerance of
	// Recorded; when it is not, no tried threshold matched the count.
	Matched bool `json:"matched"`
	// Over is the highest tried threshold that generated more spikes than
	// recorded, Under the lowest that generated at most as many (nil when
	// none was tried): the count jumps between them.
	Over  *Trial `json:"over,omitempty"`
	Under *Trial `json:"under,omitempty"`
}

// Trial is one tried threshold and the spikes its rollout generated.
type Trial struct {
	Threshold float64 `json:"threshold"`
	Generated int     `json:"generated"`
}

// Mismatch describes a cell whose count no threshold matched, "" for a
// matched cell: "cell 102: no threshold matches 225 recorded spikes:
// nearest 0 at t=0.46765542; over 22263 at t=0.46765542, under 0 at
// t=0.46765543", over and under being the tried thresholds closest to the
// crossing on either side (Over, Under).
func (c ThresholdCell) Mismatch() string {
	if c.Matched {
		return ""
	}
	s := fmt.Sprintf("cell %d: no threshold matches %d recorded spikes: nearest %d at t=%.9g", c.ID, c.Recorded, c.Generated, c.Threshold)
	if c.Over != nil {
		s += fmt.Sprintf("; over %d at t=%.9g", c.Over.Generated, c.Over.Threshold)
	}
	if c.Under != nil {
		s += fmt.Sprintf("; under %d at t=%.9g", c.Under.Generated, c.Under.Threshold)
	}
	return s
}

// maxThresholdFile bounds the size of a threshold file read from disk.
const maxThresholdFile = 16 << 20

// LoadThreshold reads a threshold policy written by FitThresholds' caller.
func LoadThreshold(path string) (*Threshold, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rollout: threshold policy: %w", err)
	}
	if st.Size() > maxThresholdFile {
		return nil, fmt.Errorf("rollout: threshold policy %s: %d bytes exceeds %d", path, st.Size(), maxThresholdFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rollout: threshold policy: %w", err)
	}
	var f ThresholdFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("rollout: threshold policy %s: %w", path, err)
	}
	if len(f.Cells) == 0 {
		return nil, fmt.Errorf("rollout: threshold policy %s: no cells", path)
	}
	t := &Threshold{Thresholds: make(map[int]float64, len(f.Cells)), Source: path, Split: f.Split}
	for _, c := range f.Cells {
		if _, dup := t.Thresholds[c.ID]; dup {
			return nil, fmt.Errorf("rollout: threshold policy %s: cell %d listed twice", path, c.ID)
		}
		if !(c.Threshold > 0 && c.Threshold <= 1) {
			return nil, fmt.Errorf("rollout: threshold policy %s: cell %d threshold %v outside (0, 1]", path, c.ID, c.Threshold)
		}
		t.Thresholds[c.ID] = c.Threshold
	}
	return t, nil
}
