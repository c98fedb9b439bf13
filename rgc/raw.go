package rgc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// File names of the recording layout (see data/README.md).
const (
	FileJSON     = "recording.json"
	FilePattern  = "stimulus_pattern.npy"
	FileTriggers = "stimulus_triggers.npy"
	FileSamples  = "spike_samples.npy"
	FileOffsets  = "spike_offsets.npy"
)

// maxFileBytes bounds the size of any .npy file of a recording that is read.
const maxFileBytes = 1 << 30

// maxJSONBytes bounds the size of recording.json. Decoding JSON costs
// several times the text's size (a cell entry of 3 bytes, "{},", decodes to
// a 24-byte struct); the shipped 154-cell file is 12 KB, so 16 MiB leaves
// room for hundreds of thousands of cells while bounding what a hostile
// file can make the decoder allocate.
const maxJSONBytes = 16 << 20

// Bounds on a recording's time axis, in sensor samples. Binning allocates
// memory in proportion to num_sensor_samples (StimChannels float32s per
// bin), so the length must be backed by the stimulus the files hold: every
// frame of stimulus_triggers.npy is at most MaxFrameSamples long, and the
// recording extends at most MaxEdgeSamples before the first trigger and
// after the last one. MaxRecordingSamples caps the total whatever the number
// of frames.
const (
	// MaxFrameSamples is the longest stimulus frame accepted: 2^20 samples,
	// about 59 s at SensorRateHz (the shipped frames last 802-1488).
	MaxFrameSamples = 1 << 20
	// MaxEdgeSamples is the longest stretch of recording accepted before
	// the first trigger or after the last one: 2^24 samples, about 15.7
	// minutes at SensorRateHz (the shipped recording has 0 and 1).
	MaxEdgeSamples = 1 << 24
	// MaxRecordingSamples is the longest recording accepted: 2^31 samples,
	// about 33 hours at SensorRateHz (119 million bins, 1.9 GB of binned
	// stimulus), above the 24 hours rgc/synth generates at most.
	MaxRecordingSamples = 1 << 31
)

// CellInfo is one spike-sorted cluster of a raw recording.
type CellInfo struct {
	// ClusterID is the spike sorter's cluster id, the cell's identity.
	ClusterID int
	// Quality marks the cells the reference work kept after its quality
	// filter; training defaults to these.
	Quality bool
	// Spikes holds the sensor sample of every spike, ascending.
	Spikes []int64
}

// Raw is a recording exactly as stored on disk: recording.json plus the four
// .npy files, in sensor samples.
type Raw struct {
	// Name is the recording's name.
	Name string
	// Species is the animal the retina came from.
	Species string
	// Source credits the recording.
	Source string
	// SampleRateHz is the MEA sensor sample rate.
	SampleRateHz float64
	// NumSamples is the recording's length in sensor samples.
	NumSamples int64
	// StimulusName names the stimulus (e.g. "FF_Noise").
	StimulusName string
	// Channels names the StimChannels LEDs, in pattern column order.
	Channels []string
	// WavelengthsNm holds each LED's wavelength.
	WavelengthsNm []int
	// FrameRateHz is the stimulus' nominal frame rate.
	FrameRateHz float64
	// Pattern holds each stimulus frame's LED states, 0 (off) or 1 (on).
	Pattern [][StimChannels]int8
	// Triggers holds the sensor sample at which each frame starts, plus one
	// final entry marking the end of the last frame (len(Pattern)+1 entries).
	Triggers []int64
	// Cells holds every cluster, in file order.
	Cells []CellInfo
}

// recordingJSON is the schema of recording.json.
type recordingJSON struct {
	Name               string  `json:"name"`
	Species            string  `json:"species"`
	Source             string  `json:"source"`
	SensorSampleRateHz float64 `json:"sensor_sample_rate_hz"`
	NumSensorSamples   int64   `json:"num_sensor_samples"`
	Stimulus           struct {
		Name               string   `json:"name"`
		Channels           []string `json:"channels"`
		WavelengthNm       []int    `json:"wavelength_nm"`
		NominalFrameRateHz float64  `json:"nominal_frame_rate_hz"`
		Frames             int      `json:"frames"`
	} `json:"stimulus"`
	Files map[string]string `json:"files"`
	Cells []struct {
		ClusterID int   `json:"cluster_id"`
		Quality   bool  `json:"quality"`
		Spikes    int64 `json:"spikes"`
	} `json:"cells"`
}

// fileDescriptions documents every .npy file inside recording.json.
var fileDescriptions = map[string]string{
	FilePattern:  "int8 [frames, 4]: LED on (1) or off (0) per stimulus frame, channels in stimulus.channels order",
	FileTriggers: "int64 [frames + 1]: sensor sample at which each stimulus frame starts; the last entry marks the end of the last frame",
	FileSamples:  "int64 [spikes]: sensor sample of every spike, cell by cell, ascending within a cell",
	FileOffsets:  "int64 [cells + 1]: cell i's spikes are spike_samples[offsets[i]:offsets[i+1]]",
}

// parseRecordingJSON decodes and checks recording.json's content.
func parseRecordingJSON(data []byte) (*recordingJSON, error) {
	var j recordingJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("%s: %w", FileJSON, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the JSON object", FileJSON)
	}
	if j.Stimulus.Frames < 0 {
		return nil, fmt.Errorf("%s: stimulus.frames = %d is negative", FileJSON, j.Stimulus.Frames)
	}
	for i, c := range j.Cells {
		if c.Spikes < 0 {
			return nil, fmt.Errorf("%s: cells[%d] (cluster %d): negative spike count %d", FileJSON, i, c.ClusterID, c.Spikes)
		}
	}
	return &j, nil
}

// readFile reads one file of a recording, at most limit bytes.
func readFile(dir, name string, limit int64) ([]byte, error) {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: missing file", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	// Refuse an oversized regular file before reading any of it; the
	// limited read below also bounds files whose size Stat cannot tell.
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, larger than %d bytes", name, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}

// decodeNPY reads an .npy file's bytes and checks its dtype and number of
// dimensions; want is the required dtype ("i1" or "i8").
func decodeNPY(name string, data []byte, want string, ndim int) (*NPY, error) {
	a, err := ReadNPY(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if a.Dtype != want {
		return nil, fmt.Errorf("%s: dtype %s, want %s", name, a.Dtype, want)
	}
	if len(a.Shape) != ndim {
		return nil, fmt.Errorf("%s: shape %v has %d dimensions, want %d", name, a.Shape, len(a.Shape), ndim)
	}
	return a, nil
}

// LoadRaw reads a recording directory (recording.json and the four .npy
// files) and validates it fully: every error names the offending file and
// what is wrong with it.
func LoadRaw(dir string) (*Raw, error) {
	r, err := loadRaw(dir)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", dir, err)
	}
	return r, nil
}

func loadRaw(dir string) (*Raw, error) {
	if st, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("no such directory")
		}
		return nil, err
	} else if !st.IsDir() {
		return nil, errors.New("not a directory")
	}
	files := map[string][]byte{}
	for _, name := range []string{FileJSON, FilePattern, FileTriggers, FileSamples, FileOffsets} {
		limit := int64(maxFileBytes)
		if name == FileJSON {
			limit = maxJSONBytes
		}
		data, err := readFile(dir, name, limit)
		if err != nil {
			return nil, err
		}
		files[name] = data
	}
	return decodeRaw(files)
}

// decodeRaw builds and validates a Raw from the bytes of its five files.
func decodeRaw(files map[string][]byte) (*Raw, error) {
	j, err := parseRecordingJSON(files[FileJSON])
	if err != nil {
		return nil, err
	}
	r := &Raw{
		Name:          j.Name,
		Species:       j.Species,
		Source:        j.Source,
		SampleRateHz:  j.SensorSampleRateHz,
		NumSamples:    j.NumSensorSamples,
		StimulusName:  j.Stimulus.Name,
		Channels:      j.Stimulus.Channels,
		WavelengthsNm: j.Stimulus.WavelengthNm,
		FrameRateHz:   j.Stimulus.NominalFrameRateHz,
	}

	pat, err := decodeNPY(FilePattern, files[FilePattern], "i1", 2)
	if err != nil {
		return nil, err
	}
	if pat.Shape[1] != StimChannels {
		return nil, fmt.Errorf("%s: shape %v, want [frames, %d]", FilePattern, pat.Shape, StimChannels)
	}
	if pat.Shape[0] != j.Stimulus.Frames {
		return nil, fmt.Errorf("%s: %d frames but %s says stimulus.frames = %d", FilePattern, pat.Shape[0], FileJSON, j.Stimulus.Frames)
	}
	r.Pattern = make([][StimChannels]int8, pat.Shape[0])
	for i := range r.Pattern {
		for c := 0; c < StimChannels; c++ {
			r.Pattern[i][c] = int8(pat.Data[i*StimChannels+c])
		}
	}

	trig, err := decodeNPY(FileTriggers, files[FileTriggers], "i8", 1)
	if err != nil {
		return nil, err
	}
	if trig.Shape[0] != len(r.Pattern)+1 {
		return nil, fmt.Errorf("%s: %d triggers for %d frames, want frames + 1 = %d", FileTriggers, trig.Shape[0], len(r.Pattern), len(r.Pattern)+1)
	}
	if r.Triggers, err = trig.Int64s(); err != nil {
		return nil, fmt.Errorf("%s: %w", FileTriggers, err)
	}

	off, err := decodeNPY(FileOffsets, files[FileOffsets], "i8", 1)
	if err != nil {
		return nil, err
	}
	if off.Shape[0] != len(j.Cells)+1 {
		return nil, fmt.Errorf("%s: %d offsets for %d cells in %s, want cells + 1 = %d", FileOffsets, off.Shape[0], len(j.Cells), FileJSON, len(j.Cells)+1)
	}
	offsets, err := off.Int64s()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FileOffsets, err)
	}
	samp, err := decodeNPY(FileSamples, files[FileSamples], "i8", 1)
	if err != nil {
		return nil, err
	}
	samples, err := samp.Int64s()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FileSamples, err)
	}
	if offsets[0] != 0 {
		return nil, fmt.Errorf("%s: first offset is %d, want 0", FileOffsets, offsets[0])
	}
	for i := 1; i < len(offsets); i++ {
		if offsets[i] < offsets[i-1] {
			return nil, fmt.Errorf("%s: offsets not monotone: offsets[%d] = %d < offsets[%d] = %d", FileOffsets, i, offsets[i], i-1, offsets[i-1])
		}
	}
	if last := offsets[len(offsets)-1]; last != int64(len(samples)) {
		return nil, fmt.Errorf("%s: last offset %d does not match the %d spikes in %s", FileOffsets, last, len(samples), FileSamples)
	}
	r.Cells = make([]CellInfo, len(j.Cells))
	for i, c := range j.Cells {
		n := offsets[i+1] - offsets[i]
		if n != c.Spikes {
			return nil, fmt.Errorf("%s: cells[%d] (cluster %d) says %d spikes but %s gives %d", FileJSON, i, c.ClusterID, c.Spikes, FileOffsets, n)
		}
		r.Cells[i] = CellInfo{ClusterID: c.ClusterID, Quality: c.Quality, Spikes: samples[offsets[i]:offsets[i+1]:offsets[i+1]]}
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// Validate checks the recording's consistency: a positive, finite sample
// rate, a length of 1..MaxRecordingSamples samples, four channels, LED
// states 0 or 1, strictly increasing triggers inside the recording, frames
// of at most MaxFrameSamples, at most MaxEdgeSamples of recording before the
// first trigger and after the last (so the length is backed by the
// stimulus file, and binning allocates in proportion to the data), unique
// cluster ids, and every cell's spikes ascending and inside [0, NumSamples).
// Each error names the file that holds the offending value.
func (r *Raw) Validate() error {
	if r.Name == "" {
		return fmt.Errorf("%s: empty name", FileJSON)
	}
	if math.IsNaN(r.SampleRateHz) || math.IsInf(r.SampleRateHz, 0) || r.SampleRateHz <= 0 {
		return fmt.Errorf("%s: sensor_sample_rate_hz = %g is not a positive finite rate", FileJSON, r.SampleRateHz)
	}
	if math.IsNaN(r.FrameRateHz) || math.IsInf(r.FrameRateHz, 0) || r.FrameRateHz < 0 {
		return fmt.Errorf("%s: stimulus.nominal_frame_rate_hz = %g is not a finite non-negative rate", FileJSON, r.FrameRateHz)
	}
	if r.NumSamples <= 0 {
		return fmt.Errorf("%s: num_sensor_samples = %d is not positive", FileJSON, r.NumSamples)
	}
	if r.NumSamples > MaxRecordingSamples {
		return fmt.Errorf("%s: num_sensor_samples = %d exceeds the limit of %d", FileJSON, r.NumSamples, int64(MaxRecordingSamples))
	}
	if len(r.Channels) != StimChannels {
		return fmt.Errorf("%s: stimulus.channels has %d entries, want %d", FileJSON, len(r.Channels), StimChannels)
	}
	if len(r.WavelengthsNm) != StimChannels {
		return fmt.Errorf("%s: stimulus.wavelength_nm has %d entries, want %d", FileJSON, len(r.WavelengthsNm), StimChannels)
	}
	for i, f := range r.Pattern {
		for c, v := range f {
			if v != 0 && v != 1 {
				return fmt.Errorf("%s: frame %d LED %d has value %d, want 0 or 1", FilePattern, i, c, v)
			}
		}
	}
	if len(r.Triggers) != len(r.Pattern)+1 {
		return fmt.Errorf("%s: %d triggers for %d frames, want frames + 1", FileTriggers, len(r.Triggers), len(r.Pattern))
	}
	for i, t := range r.Triggers {
		if t < 0 || t > r.NumSamples {
			return fmt.Errorf("%s: trigger %d at sample %d is outside the recording [0, %d]", FileTriggers, i, t, r.NumSamples)
		}
		if i > 0 && t <= r.Triggers[i-1] {
			return fmt.Errorf("%s: triggers not increasing: trigger %d at %d after trigger %d at %d", FileTriggers, i, t, i-1, r.Triggers[i-1])
		}
		if i > 0 && t-r.Triggers[i-1] > MaxFrameSamples {
			return fmt.Errorf("%s: frame %d lasts %d samples (triggers %d to %d), longer than the limit of %d", FileTriggers, i-1, t-r.Triggers[i-1], r.Triggers[i-1], t, MaxFrameSamples)
		}
	}
	if first := r.Triggers[0]; first > MaxEdgeSamples {
		return fmt.Errorf("%s: first trigger at sample %d: more than %d samples of recording before the stimulus", FileTriggers, first, MaxEdgeSamples)
	}
	if last := r.Triggers[len(r.Triggers)-1]; r.NumSamples-last > MaxEdgeSamples {
		return fmt.Errorf("%s: num_sensor_samples = %d extends more than %d samples past the last trigger (sample %d of %s)", FileJSON, r.NumSamples, MaxEdgeSamples, last, FileTriggers)
	}
	seen := make(map[int]int, len(r.Cells))
	for i, c := range r.Cells {
		if prev, dup := seen[c.ClusterID]; dup {
			return fmt.Errorf("%s: cells[%d] and cells[%d] share cluster id %d", FileJSON, prev, i, c.ClusterID)
		}
		seen[c.ClusterID] = i
		for k, s := range c.Spikes {
			if s < 0 || s >= r.NumSamples {
				return fmt.Errorf("%s: cell %d (cluster %d) spike %d at sample %d is outside the recording [0, %d)", FileSamples, i, c.ClusterID, k, s, r.NumSamples)
			}
			if k > 0 && s < c.Spikes[k-1] {
				return fmt.Errorf("%s: cell %d (cluster %d) spikes not ascending at spike %d (%d after %d)", FileSamples, i, c.ClusterID, k, s, c.Spikes[k-1])
			}
		}
	}
	return nil
}

// Write validates the recording and writes it to dir (created if needed) in
// the shared layout: recording.json and the four .npy files, readable by
// LoadRaw.
func (r *Raw) Write(dir string) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("write recording %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write recording %s: %w", dir, err)
	}
	var j recordingJSON
	j.Name, j.Species, j.Source = r.Name, r.Species, r.Source
	j.SensorSampleRateHz, j.NumSensorSamples = r.SampleRateHz, r.NumSamples
	j.Stimulus.Name = r.StimulusName
	j.Stimulus.Channels = r.Channels
	j.Stimulus.WavelengthNm = r.WavelengthsNm
	j.Stimulus.NominalFrameRateHz = r.FrameRateHz
	j.Stimulus.Frames = len(r.Pattern)
	j.Files = fileDescriptions
	offsets := make([]int64, len(r.Cells)+1)
	var samples []int64
	for i, c := range r.Cells {
		j.Cells = append(j.Cells, struct {
			ClusterID int   `json:"cluster_id"`
			Quality   bool  `json:"quality"`
			Spikes    int64 `json:"spikes"`
		}{c.ClusterID, c.Quality, int64(len(c.Spikes))})
		samples = append(samples, c.Spikes...)
		offsets[i+1] = int64(len(samples))
	}
	if samples == nil {
		samples = []int64{}
	}
	js, err := json.MarshalIndent(&j, "", " ")
	if err != nil {
		return fmt.Errorf("write recording %s: %s: %w", dir, FileJSON, err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileJSON), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("write recording %s: %w", dir, err)
	}
	pat := make([]int8, 0, len(r.Pattern)*StimChannels)
	for _, f := range r.Pattern {
		pat = append(pat, f[:]...)
	}
	arrays := []struct {
		name  string
		data  any
		shape []int
	}{
		{FilePattern, pat, []int{len(r.Pattern), StimChannels}},
		{FileTriggers, r.Triggers, nil},
		{FileSamples, samples, nil},
		{FileOffsets, offsets, nil},
	}
	for _, a := range arrays {
		if err := writeNPYFile(filepath.Join(dir, a.name), a.data, a.shape); err != nil {
			return fmt.Errorf("write recording %s: %w", dir, err)
		}
	}
	return nil
}

// writeNPYFile writes one array to path.
func writeNPYFile(path string, data any, shape []int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteNPY(f, data, shape); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return f.Close()
}
