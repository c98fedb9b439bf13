// Package kilosort converts the output of the Kilosort spike sorter, as
// curated in phy, plus a stimulus description into the recording layout of
// package rgc (docs/data.md), so a user's own recording can be inspected,
// trained on and evaluated like the shipped one.
//
// From the Kilosort/phy directory it reads spike_times.npy (sample of every
// spike), spike_clusters.npy (its cluster), cluster_group.tsv (phy's
// curated labels) or else cluster_KSLabel.tsv (Kilosort's own), and
// params.py (sample_rate). The stimulus is given as frame triggers in sensor
// samples (frames + 1 entries, the last ending the last frame, or frames
// entries) and a frames x 4 pattern of LED states 0/1, each as .npy or CSV.
package kilosort

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"rgcpred/rgc"
)

// File names of a Kilosort/phy output directory.
const (
	FileSpikeTimes    = "spike_times.npy"
	FileSpikeClusters = "spike_clusters.npy"
	FileClusterGroup  = "cluster_group.tsv"
	FileKSLabel       = "cluster_KSLabel.tsv"
	FileParams        = "params.py"
)

// maxTextBytes bounds the size of a text file read (TSV, params.py, CSV).
const maxTextBytes = 256 << 20

// Quality selects the clusters marked as quality cells.
type Quality struct {
	// All marks every kept cluster as a quality cell.
	All bool
	// IDs, when not nil, lists the quality clusters explicitly.
	IDs []int
}

// Options configures a conversion. Only the directory and the two stimulus
// files are required.
type Options struct {
	// Dir is the Kilosort/phy output directory.
	Dir string
	// Triggers is the frame trigger file (.npy or .csv): sensor samples at
	// which frames start.
	Triggers string
	// Pattern is the LED pattern file (.npy or .csv): frames x 4, 0 or 1.
	Pattern string
	// Quality chooses the quality cells; the zero value means the clusters
	// labelled "good".
	Quality Quality
	// KeepNoise keeps clusters labelled "noise" (dropped by default).
	KeepNoise bool
	// NumSamples is the recording's length in sensor samples; 0 means the
	// end of the last frame or one past the last spike, whichever is later.
	NumSamples int64
	// Name names the recording (default: the directory's base name).
	Name string
	// Species, Source and StimulusName describe the recording.
	Species, Source, StimulusName string
	// Channels and WavelengthsNm describe the four LEDs (default: the
	// shipped recording's red, green, blue, UV at 680/530/470/400 nm).
	Channels      []string
	WavelengthsNm []int
	// FrameRateHz is the nominal frame rate (default: from the median
	// frame length).
	FrameRateHz float64
}

// Report summarises a conversion.
type Report struct {
	// SampleRateHz is params.py's sample_rate.
	SampleRateHz float64
	// Labels names the file the cluster labels came from ("" if none).
	Labels string
	// Clusters is the number of clusters with spikes; Kept of them became
	// cells, Quality of those quality cells; DroppedNoise were labelled noise.
	Clusters, Kept, Quality, DroppedNoise int
	// Spikes is the number of spikes kept.
	Spikes int
	// Frames is the number of stimulus frames; LastFrameEstimated is set
	// when the triggers had no end entry and the last frame was given the
	// median frame length.
	Frames             int
	LastFrameEstimated bool
}

// Convert reads a Kilosort/phy directory and a stimulus and returns the
// validated recording (rgc.Raw; write it with Raw.Write) and a summary.
// Every error names the file at fault.
func Convert(opt Options) (*rgc.Raw, *Report, error) {
	rep := &Report{}
	rate, err := readSampleRate(filepath.Join(opt.Dir, FileParams))
	if err != nil {
		return nil, nil, err
	}
	rep.SampleRateHz = rate
	times, err := readInts(filepath.Join(opt.Dir, FileSpikeTimes))
	if err != nil {
		return nil, nil, err
	}
	clusters, err := readInts(filepath.Join(opt.Dir, FileSpikeClusters))
	if err != nil {
		return nil, nil, err
	}
	if len(times) != len(clusters) {
		return nil, nil, fmt.Errorf("kilosort: %s has %d spikes but %s has %d", FileSpikeTimes, len(times), FileSpikeClusters, len(clusters))
	}
	labels, src, err := readLabels(opt.Dir)
	if err != nil {
		return nil, nil, err
	}
	rep.Labels = src
	if src == "" && !opt.Quality.All && opt.Quality.IDs == nil {
		return nil, nil, fmt.Errorf("kilosort: %s has neither %s nor %s: choose the quality cells explicitly (all, or a list of cluster ids)", opt.Dir, FileClusterGroup, FileKSLabel)
	}

	byCluster := make(map[int][]int64)
	for i, c := range clusters {
		if times[i] < 0 {
			return nil, nil, fmt.Errorf("kilosort: %s: spike %d at negative sample %d", FileSpikeTimes, i, times[i])
		}
		if c < 0 || c > math.MaxInt32 {
			return nil, nil, fmt.Errorf("kilosort: %s: spike %d has cluster id %d", FileSpikeClusters, i, c)
		}
		byCluster[int(c)] = append(byCluster[int(c)], times[i])
	}
	ids := make([]int, 0, len(byCluster))
	for id := range byCluster {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	rep.Clusters = len(ids)
	want := make(map[int]bool)
	for _, id := range opt.Quality.IDs {
		if _, ok := byCluster[id]; !ok {
			return nil, nil, fmt.Errorf("kilosort: quality cluster %d has no spikes in %s", id, FileSpikeClusters)
		}
		want[id] = true
	}

	raw := &rgc.Raw{
		Name: opt.Name, Species: opt.Species, Source: opt.Source, StimulusName: opt.StimulusName,
		SampleRateHz: rate, Channels: opt.Channels, WavelengthsNm: opt.WavelengthsNm, FrameRateHz: opt.FrameRateHz,
	}
	var lastSpike int64 = -1
	for _, id := range ids {
		label := labels[id]
		if label == "noise" && !opt.KeepNoise {
			rep.DroppedNoise++
			continue
		}
		q := label == "good"
		switch {
		case opt.Quality.All:
			q = true
		case opt.Quality.IDs != nil:
			q = want[id]
		}
		if want[id] && label == "noise" && !opt.KeepNoise {
			return nil, nil, fmt.Errorf("kilosort: quality cluster %d is labelled noise in %s", id, src)
		}
		sp := byCluster[id]
		slices.Sort(sp)
		lastSpike = max(lastSpike, sp[len(sp)-1])
		raw.Cells = append(raw.Cells, rgc.CellInfo{ClusterID: id, Quality: q, Spikes: sp})
		rep.Kept++
		rep.Spikes += len(sp)
		if q {
			rep.Quality++
		}
	}

	if err := readStimulus(opt, raw, rep); err != nil {
		return nil, nil, err
	}
	raw.NumSamples = opt.NumSamples
	if raw.NumSamples == 0 {
		raw.NumSamples = max(raw.Triggers[len(raw.Triggers)-1], lastSpike+1)
	}
	fillDefaults(opt, raw)
	if err := raw.Validate(); err != nil {
		return nil, nil, fmt.Errorf("kilosort: converted recording: %w", err)
	}
	return raw, rep, nil
}

// fillDefaults fills the descriptive fields left empty.
func fillDefaults(opt Options, raw *rgc.Raw) {
	if raw.Name == "" {
		abs, err := filepath.Abs(opt.Dir)
		if err != nil {
			abs = opt.Dir
		}
		raw.Name = filepath.Base(abs)
	}
	if raw.Source == "" {
		raw.Source = "converted from Kilosort/phy output " + opt.Dir
	}
	if raw.StimulusName == "" {
		raw.StimulusName = filepath.Base(opt.Pattern)
	}
	if raw.Channels == nil {
		raw.Channels = []string{"red", "green", "blue", "uv"}
	}
	if raw.WavelengthsNm == nil {
		raw.WavelengthsNm = []int{680, 530, 470, 400}
	}
	if raw.FrameRateHz == 0 && len(raw.Triggers) > 1 {
		d := make([]int64, len(raw.Triggers)-1)
		for i := range d {
			d[i] = raw.Triggers[i+1] - raw.Triggers[i]
		}
		slices.Sort(d)
		if med := d[len(d)/2]; med > 0 {
			raw.FrameRateHz = raw.SampleRateHz / float64(med)
		}
	}
}

// readStimulus reads the trigger and pattern files into raw.
func readStimulus(opt Options, raw *rgc.Raw, rep *Report) error {
	if opt.Triggers == "" || opt.Pattern == "" {
		return errors.New("kilosort: the stimulus needs a trigger file and a pattern file")
	}
	trig, err := readInts(opt.Triggers)
	if err != nil {
		return err
	}
	pat, cols, err := readTable(opt.Pattern)
	if err != nil {
		return err
	}
	if cols != rgc.StimChannels {
		return fmt.Errorf("kilosort: %s has %d columns, want %d (one per LED)", opt.Pattern, cols, rgc.StimChannels)
	}
	frames := len(pat) / cols
	rep.Frames = frames
	if frames == 0 {
		return fmt.Errorf("kilosort: %s has no frames", opt.Pattern)
	}
	raw.Pattern = make([][rgc.StimChannels]int8, frames)
	for i, v := range pat {
		if v != 0 && v != 1 {
			return fmt.Errorf("kilosort: %s: frame %d LED %d is %g, want 0 or 1", opt.Pattern, i/cols, i%cols, v)
		}
		raw.Pattern[i/cols][i%cols] = int8(v)
	}
	switch len(trig) {
	case frames + 1:
	case frames:
		if frames < 2 {
			return fmt.Errorf("kilosort: %s: one frame and no end trigger: give frames + 1 triggers", opt.Triggers)
		}
		d := make([]int64, frames-1)
		for i := range d {
			d[i] = trig[i+1] - trig[i]
		}
		slices.Sort(d)
		trig = append(trig, trig[frames-1]+d[len(d)/2])
		rep.LastFrameEstimated = true
	default:
		return fmt.Errorf("kilosort: %s has %d triggers for the %d frames of %s, want frames + 1 (or frames)", opt.Triggers, len(trig), frames, opt.Pattern)
	}
	for i := 1; i < len(trig); i++ {
		if trig[i] <= trig[i-1] {
			return fmt.Errorf("kilosort: %s: triggers not increasing: trigger %d at %d after %d", opt.Triggers, i, trig[i], trig[i-1])
		}
	}
	raw.Triggers = trig
	return nil
}

// readSampleRate reads sample_rate from params.py (Python assignments, one
// per line).
func readSampleRate(path string) (float64, error) {
	data, err := readText(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "sample_rate" {
			continue
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return 0, fmt.Errorf("kilosort: %s: sample_rate = %q is not a positive number", path, strings.TrimSpace(v))
		}
		return r, nil
	}
	return 0, fmt.Errorf("kilosort: %s has no sample_rate", path)
}

// readLabels reads cluster labels from cluster_group.tsv (phy), else
// cluster_KSLabel.tsv (Kilosort); it returns the file used, "" if neither
// exists.
func readLabels(dir string) (map[int]string, string, error) {
	for _, name := range []string{FileClusterGroup, FileKSLabel} {
		path := filepath.Join(dir, name)
		data, err := readText(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		labels, err := parseLabels(name, string(data))
		return labels, name, err
	}
	return map[int]string{}, "", nil
}

// parseLabels parses a two-column TSV with a header (cluster_id, label).
func parseLabels(name, text string) (map[int]string, error) {
	labels := make(map[int]string)
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "cluster_id") {
		return nil, fmt.Errorf("kilosort: %s: first line should be the header cluster_id<TAB>label", name)
	}
	for n, line := range lines[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			return nil, fmt.Errorf("kilosort: %s line %d: want two tab-separated columns, got %q", name, n+2, line)
		}
		id, err := strconv.Atoi(strings.TrimSpace(f[0]))
		if err != nil {
			return nil, fmt.Errorf("kilosort: %s line %d: cluster id %q is not an integer", name, n+2, f[0])
		}
		l := strings.ToLower(strings.TrimSpace(f[1]))
		switch l {
		case "good", "mua", "noise", "unsorted":
		default:
			return nil, fmt.Errorf("kilosort: %s line %d: label %q is not good, mua, noise or unsorted", name, n+2, f[1])
		}
		if _, dup := labels[id]; dup {
			return nil, fmt.Errorf("kilosort: %s line %d: cluster %d labelled twice", name, n+2, id)
		}
		labels[id] = l
	}
	return labels, nil
}

// readInts reads a vector of integers from .npy (shape [n] or [n, 1]) or
// from text (.csv, .txt: numbers separated by commas, whitespace or lines).
func readInts(path string) ([]int64, error) {
	if strings.EqualFold(filepath.Ext(path), ".npy") {
		a, err := readNPY(path)
		if err != nil {
			return nil, err
		}
		if len(a.Shape) != 1 && !(len(a.Shape) == 2 && a.Shape[1] == 1) {
			return nil, fmt.Errorf("kilosort: %s has shape %v, want a vector [n] or [n, 1]", path, a.Shape)
		}
		v, err := a.Int64s()
		if err != nil {
			return nil, fmt.Errorf("kilosort: %s: %w", path, err)
		}
		return v, nil
	}
	vals, cols, err := readTable(path)
	if err != nil {
		return nil, err
	}
	if cols != 1 && len(vals) != cols {
		return nil, fmt.Errorf("kilosort: %s has %d columns, want one value per line or one line", path, cols)
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return nil, fmt.Errorf("kilosort: %s: value %d (%g) is not an integer", path, i, v)
		}
		out[i] = int64(v)
	}
	return out, nil
}

// readTable reads a 2-D table of numbers, row-major, from .npy (1-D is one
// column) or CSV (comma-separated; a first line that is not numeric is a
// header; blank lines and lines starting with # are skipped). It returns
// the values and the number of columns.
func readTable(path string) ([]float64, int, error) {
	if strings.EqualFold(filepath.Ext(path), ".npy") {
		a, err := readNPY(path)
		if err != nil {
			return nil, 0, err
		}
		if len(a.Shape) < 1 || len(a.Shape) > 2 {
			return nil, 0, fmt.Errorf("kilosort: %s has shape %v, want 1 or 2 dimensions", path, a.Shape)
		}
		v, err := a.Float64s()
		if err != nil {
			return nil, 0, fmt.Errorf("kilosort: %s: %w", path, err)
		}
		cols := 1
		if len(a.Shape) == 2 {
			cols = a.Shape[1]
		}
		return v, cols, nil
	}
	data, err := readText(path)
	if err != nil {
		return nil, 0, err
	}
	r := csv.NewReader(strings.NewReader(string(data)))
	r.Comment = '#'
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	var vals []float64
	cols := 0
	for line := 1; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("kilosort: %s: %w", path, err)
		}
		row := make([]float64, len(rec))
		numeric := true
		for i, f := range rec {
			if row[i], err = strconv.ParseFloat(strings.TrimSpace(f), 64); err != nil {
				numeric = false
				break
			}
		}
		if !numeric {
			if cols == 0 && vals == nil {
				continue // header
			}
			return nil, 0, fmt.Errorf("kilosort: %s record %d: %q is not a row of numbers", path, line, strings.Join(rec, ","))
		}
		if cols == 0 {
			cols = len(row)
		} else if len(row) != cols {
			return nil, 0, fmt.Errorf("kilosort: %s record %d has %d columns, the first row has %d", path, line, len(row), cols)
		}
		vals = append(vals, row...)
	}
	if cols == 0 {
		return nil, 0, fmt.Errorf("kilosort: %s has no numbers", path)
	}
	return vals, cols, nil
}

// readNPY reads a .npy file.
func readNPY(path string) (*rgc.NPY, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kilosort: %w", err)
	}
	defer f.Close()
	a, err := rgc.ReadNPY(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("kilosort: %s: %w", path, err)
	}
	return a, nil
}

// readText reads a text file of at most maxTextBytes.
func readText(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kilosort: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTextBytes+1))
	if err != nil {
		return nil, fmt.Errorf("kilosort: %s: %w", path, err)
	}
	if len(data) > maxTextBytes {
		return nil, fmt.Errorf("kilosort: %s exceeds %d bytes", path, maxTextBytes)
	}
	return data, nil
}
