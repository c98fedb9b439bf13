package rgc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// smallRaw returns a tiny hand-made recording: 3 cells, 6 frames of 1000
// samples starting at sample 500, 7000 samples in all.
func smallRaw() *Raw {
	r := &Raw{
		Name: "small", Species: "test", Source: "hand-made",
		SampleRateHz: SensorRateHz, NumSamples: 7000,
		StimulusName: "FF_Noise", Channels: []string{"red", "green", "blue", "uv"},
		WavelengthsNm: []int{680, 530, 470, 400}, FrameRateHz: 20,
		Pattern: [][StimChannels]int8{
			{1, 0, 0, 1}, {0, 1, 0, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}, {1, 0, 1, 0}, {0, 1, 0, 1},
		},
		Triggers: []int64{500, 1500, 2500, 3500, 4500, 5500, 6500},
		Cells: []CellInfo{
			{ClusterID: 3, Quality: true, Spikes: []int64{0, 17, 18, 35, 6999}},
			{ClusterID: 9, Quality: false, Spikes: []int64{}},
			{ClusterID: 4, Quality: true, Spikes: []int64{100, 100, 4000}},
		},
	}
	return r
}

// writeFiles writes a recording and returns its files' bytes.
func writeFiles(t testing.TB, r *Raw) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, n := range []string{FileJSON, FilePattern, FileTriggers, FileSamples, FileOffsets} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	return dir, files
}

func TestRawWriteLoadRoundTrip(t *testing.T) {
	r := smallRaw()
	dir, _ := writeFiles(t, r)
	got, err := LoadRaw(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, r)
	}
}

func TestShippedRoundTrip(t *testing.T) {
	r, err := LoadRaw(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	// The .npy files are byte-identical to the shipped ones.
	for _, n := range []string{FilePattern, FileTriggers, FileSamples, FileOffsets} {
		a, _ := os.ReadFile(filepath.Join(shippedDir, n))
		b, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs after Write (%d vs %d bytes)", n, len(a), len(b))
		}
	}
	back, err := LoadRaw(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Error("re-loaded recording differs")
	}
}

// i64 encodes int64 values little-endian.
func i64(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// npyFile writes an .npy file of int64 or int8 values to a byte slice.
func npyFile(t testing.TB, data any, shape []int) []byte {
	var buf bytes.Buffer
	if err := WriteNPY(&buf, data, shape); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCorruptedRecordings corrupts one file of a copy of the shipped
// recording (or of the small one) at a time and checks the error names the
// file and the problem.
func TestCorruptedRecordings(t *testing.T) {
	_, base := writeFiles(t, smallRaw())
	shipped := map[string][]byte{}
	for _, n := range []string{FileJSON, FilePattern, FileTriggers, FileSamples, FileOffsets} {
		b, err := os.ReadFile(filepath.Join(shippedDir, n))
		if err != nil {
			t.Fatal(err)
		}
		shipped[n] = b
	}
	js := string(base[FileJSON])
	cases := []struct {
		name    string
		shipped bool // corrupt the shipped recording rather than the small one
		file    string
		content []byte // nil: delete the file
		want    string
	}{
		{"missing triggers", true, FileTriggers, nil, "stimulus_triggers.npy: missing file"},
		{"missing json", true, FileJSON, nil, "recording.json: missing file"},
		{"truncated samples", true, FileSamples, shipped[FileSamples][:len(shipped[FileSamples])-100], "spike_samples.npy: npy: truncated data"},
		{"truncated header", true, FilePattern, shipped[FilePattern][:40], "stimulus_pattern.npy: npy: reading"},
		{"wrong dtype header", true, FileSamples, bytes.Replace(shipped[FileSamples], []byte("'<i8'"), []byte("'<f8'"), 1), "spike_samples.npy: dtype f8, want i8"},
		{"pattern as int64", true, FilePattern, npyFile(t, make([]int64, 16200*4), []int{16200, 4}), "stimulus_pattern.npy: dtype i8, want i1"},
		{"mislabelled json spikes", true, FileJSON, bytes.Replace(shipped[FileJSON], []byte(`"spikes": 16194`), []byte(`"spikes": 16195`), 1), "recording.json: cells[0] (cluster 13) says 16195 spikes but spike_offsets.npy gives 16194"},
		{"json frames", true, FileJSON, bytes.Replace(shipped[FileJSON], []byte(`"frames": 16200`), []byte(`"frames": 16000`), 1), "stimulus_pattern.npy: 16200 frames but recording.json says stimulus.frames = 16000"},
		{"json garbage", false, FileJSON, []byte("{\"name\": "), "recording.json: unexpected EOF"},
		{"json trailing", false, FileJSON, []byte(js + "{}"), "recording.json: trailing data"},
		{"rate overflow", false, FileJSON, []byte(strings.Replace(js, `"sensor_sample_rate_hz": 17852.76785`, `"sensor_sample_rate_hz": 1e999`, 1)), "recording.json: json: cannot unmarshal number 1e999"},
		{"rate zero", false, FileJSON, []byte(strings.Replace(js, `"sensor_sample_rate_hz": 17852.76785`, `"sensor_sample_rate_hz": 0`, 1)), "sensor_sample_rate_hz = 0 is not a positive finite rate"},
		{"rate string", false, FileJSON, []byte(strings.Replace(js, `"sensor_sample_rate_hz": 17852.76785`, `"sensor_sample_rate_hz": "NaN"`, 1)), "recording.json: json: cannot unmarshal string"},
		{"negative json spikes", false, FileJSON, []byte(strings.Replace(js, `"spikes": 0`, `"spikes": -1`, 1)), "negative spike count"},
		{"cell count", false, FileOffsets, npyFile(t, []int64{0, 5, 5}, nil), "spike_offsets.npy: 3 offsets for 3 cells in recording.json, want cells + 1 = 4"},
		{"offsets not monotone", false, FileOffsets, npyFile(t, []int64{0, 5, 4, 8}, nil), "spike_offsets.npy: offsets not monotone: offsets[2] = 4 < offsets[1] = 5"},
		{"offsets start", false, FileOffsets, npyFile(t, []int64{1, 5, 5, 8}, nil), "spike_offsets.npy: first offset is 1"},
		{"offsets end", false, FileOffsets, npyFile(t, []int64{0, 5, 5, 7}, nil), "spike_offsets.npy: last offset 7 does not match the 8 spikes"},
		{"offsets 2d", false, FileOffsets, npyFile(t, []int64{0, 5, 5, 8}, []int{2, 2}), "spike_offsets.npy: shape [2 2] has 2 dimensions, want 1"},
		{"spike outside", false, FileSamples, npyFile(t, []int64{0, 17, 18, 35, 7000, 100, 100, 4000}, nil), "spike_samples.npy: cell 0 (cluster 3) spike 4 at sample 7000 is outside the recording [0, 7000)"},
		{"spike negative", false, FileSamples, npyFile(t, []int64{-1, 17, 18, 35, 69, 100, 100, 4000}, nil), "spike 0 at sample -1 is outside"},
		{"spikes unsorted", false, FileSamples, npyFile(t, []int64{0, 17, 18, 35, 6999, 100, 99, 4000}, nil), "spike_samples.npy: cell 2 (cluster 4) spikes not ascending"},
		{"triggers not increasing", false, FileTriggers, npyFile(t, []int64{500, 1500, 2500, 2500, 4500, 5500, 6500}, nil), "stimulus_triggers.npy: triggers not increasing: trigger 3 at 2500 after trigger 2 at 2500"},
		{"trigger count", false, FileTriggers, npyFile(t, []int64{500, 1500}, nil), "stimulus_triggers.npy: 2 triggers for 6 frames"},
		{"trigger outside", false, FileTriggers, npyFile(t, []int64{500, 1500, 2500, 3500, 4500, 5500, 7001}, nil), "trigger 6 at sample 7001 is outside"},
		{"pattern value", false, FilePattern, npyFile(t, []int8{1, 0, 0, 1, 0, 2, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1}, []int{6, 4}), "stimulus_pattern.npy: frame 1 LED 1 has value 2, want 0 or 1"},
		{"pattern columns", false, FilePattern, npyFile(t, make([]int8, 18), []int{6, 3}), "stimulus_pattern.npy: shape [6 3], want [frames, 4]"},
		{"not npy", false, FileOffsets, []byte("0,5,5,8\n"), "spike_offsets.npy: npy: not a .npy file (bad magic)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := base
			if tc.shipped {
				src = shipped
			}
			dir := t.TempDir()
			for n, b := range src {
				if n == tc.file {
					b = tc.content
					if b == nil {
						continue
					}
				}
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q\nwant it to contain %q", msg, tc.want)
			}
			if !strings.HasPrefix(msg, "recording "+dir+": ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one line naming the directory", msg)
			}
		})
	}
}

func TestValidateHandMade(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *Raw)
		want   string
	}{
		{"ok", func(r *Raw) {}, ""},
		{"channels", func(r *Raw) { r.Channels = r.Channels[:3] }, "stimulus.channels has 3 entries"},
		{"duplicate cluster", func(r *Raw) { r.Cells[2].ClusterID = 3 }, "share cluster id 3"},
		{"no samples", func(r *Raw) { r.NumSamples = 0 }, "num_sensor_samples = 0"},
		{"empty name", func(r *Raw) { r.Name = "" }, "empty name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := smallRaw()
			tc.mutate(r)
			err := r.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
			if werr := r.Write(t.TempDir()); werr == nil {
				t.Error("Write of an invalid recording succeeded")
			}
		})
	}
}

// maxBinsFor returns the most bins a recording that passed Validate can
// have: its frames at MaxFrameSamples each, plus MaxEdgeSamples before and
// after them, capped by MaxRecordingSamples. Binning allocates in
// proportion to it.
func maxBinsFor(r *Raw) int64 {
	n := int64(len(r.Pattern))*MaxFrameSamples + 2*MaxEdgeSamples
	return min(n, MaxRecordingSamples) / Decimation
}

// checkBinned bins an accepted recording and checks the result: a length
// within maxBinsFor (so memory stays bounded by the data) and spike bins
// inside it, ascending.
func checkBinned(t *testing.T, r *Raw) {
	t.Helper()
	if err := r.Validate(); err != nil {
		t.Fatalf("decodeRaw accepted an invalid recording: %v", err)
	}
	if bins := r.NumSamples / Decimation; bins > maxBinsFor(r) {
		t.Fatalf("accepted %d bins for %d frames, above the bound %d", bins, len(r.Pattern), maxBinsFor(r))
	}
	rec, err := r.Bin()
	if err != nil {
		t.Fatalf("validated recording does not bin: %v", err)
	}
	for _, c := range rec.Cells {
		for i, b := range c.SpikeBins {
			if b < 0 || int(b) >= rec.Bins || (i > 0 && b < c.SpikeBins[i-1]) {
				t.Fatalf("bad spike bins %v for %d bins", c.SpikeBins, rec.Bins)
			}
		}
	}
}

// FuzzLoadRaw replaces one file of a small valid recording with fuzzed bytes
// (seeded with every file's valid content and with hostile size fields) and
// checks that decoding never panics and that whatever it accepts is valid,
// has a length backed by its stimulus (maxBinsFor) and bins cleanly.
// Binning every accepted input keeps memory bounded because Validate bounds
// the length by the data.
func FuzzLoadRaw(f *testing.F) {
	names := []string{FileJSON, FilePattern, FileTriggers, FileSamples, FileOffsets}
	_, base := writeFiles(f, smallRaw())
	for i, n := range names {
		f.Add(uint8(i), base[n])
	}
	f.Add(uint8(0), []byte(`{"name":"x","sensor_sample_rate_hz":1,"num_sensor_samples":1,"stimulus":{"channels":["a","b","c","d"],"wavelength_nm":[1,2,3,4],"frames":6},"cells":[{"cluster_id":1,"spikes":8}]}`))
	js := string(base[FileJSON])
	for _, huge := range []string{"38654705663", "9223372036854775807", "2147483648", "16784116", "1e300", "-1"} {
		f.Add(uint8(0), []byte(strings.Replace(js, `"num_sensor_samples": 7000`, `"num_sensor_samples": `+huge, 1)))
	}
	f.Add(uint8(0), []byte(strings.Replace(js, `"frames": 6`, `"frames": 9223372036854775807`, 1)))
	f.Add(uint8(0), []byte(strings.Replace(js, `"spikes": 5`, `"spikes": 9223372036854775807`, 1)))
	f.Add(uint8(2), npyFile(f, []int64{0, 1, 2, 3, 4, 5, 7000}, nil))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		files := map[string][]byte{}
		for k, v := range base {
			files[k] = v
		}
		files[names[int(which)%len(names)]] = data
		r, err := decodeRaw(files)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		checkBinned(t, r)
	})
}

// FuzzRecordingSizes writes fuzzed size fields into a small valid
// recording - num_sensor_samples, the first and last trigger, stimulus.frames
// and a cell's spike count - so the fuzzer searches the size space directly
// (huge, negative, inconsistent values), and checks that decoding never
// panics and that an accepted recording bins within maxBinsFor.
func FuzzRecordingSizes(f *testing.F) {
	base := smallRaw()
	_, files := writeFiles(f, base)
	f.Add(int64(7000), int64(500), int64(6500), 6, int64(5))
	f.Add(int64(38654705663), int64(500), int64(6500), 6, int64(5))
	f.Add(int64(1<<31), int64(500), int64(1<<31-1000), 6, int64(5))
	f.Add(int64(1<<30), int64(1<<24+1), int64(1<<30-10), 6, int64(5))
	f.Add(int64(9223372036854775807), int64(0), int64(9223372036854775000), 1<<62, int64(-1))
	f.Fuzz(func(t *testing.T, numSamples, firstTrig, lastTrig int64, frames int, spikes0 int64) {
		var j recordingJSON
		if err := json.Unmarshal(files[FileJSON], &j); err != nil {
			t.Fatal(err)
		}
		j.NumSensorSamples, j.Stimulus.Frames, j.Cells[0].Spikes = numSamples, frames, spikes0
		js, err := json.Marshal(&j)
		if err != nil {
			t.Fatal(err)
		}
		trig := append([]int64(nil), base.Triggers...)
		trig[0], trig[len(trig)-1] = firstTrig, lastTrig
		fz := map[string][]byte{}
		for k, v := range files {
			fz[k] = v
		}
		fz[FileJSON], fz[FileTriggers] = js, npyFile(t, trig, nil)
		r, err := decodeRaw(fz)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		checkBinned(t, r)
	})
}

// TestHostileSizes feeds recordings whose size fields are huge or
// inconsistent with the data files: each must fail with an error naming
// the file and field, and loading must allocate little (at most
// maxAllocBytes), never in proportion to the claimed size.
func TestHostileSizes(t *testing.T) {
	const maxAllocBytes = 64 << 20
	_, base := writeFiles(t, smallRaw())
	js := string(base[FileJSON])
	setJSON := func(old, new string) func(map[string][]byte) {
		return func(f map[string][]byte) {
			if !strings.Contains(js, old) {
				t.Fatalf("%q not in recording.json", old)
			}
			f[FileJSON] = []byte(strings.Replace(js, old, new, 1))
		}
	}
	setTriggers := func(v ...int64) func(map[string][]byte) {
		return func(f map[string][]byte) { f[FileTriggers] = npyFile(t, v, nil) }
	}
	both := func(a, b func(map[string][]byte)) func(map[string][]byte) {
		return func(f map[string][]byte) { a(f); b(f) }
	}
	const samples = `"num_sensor_samples": 7000`
	cases := []struct {
		name   string
		mutate func(map[string][]byte)
		want   string
	}{
		{"samples for 2^31 bins", setJSON(samples, `"num_sensor_samples": 38654705663`), "recording.json: num_sensor_samples = 38654705663 exceeds the limit of 2147483648"},
		{"samples max int64", setJSON(samples, `"num_sensor_samples": 9223372036854775807`), "num_sensor_samples = 9223372036854775807 exceeds the limit"},
		{"samples past the stimulus", setJSON(samples, `"num_sensor_samples": 16784117`), "recording.json: num_sensor_samples = 16784117 extends more than 16777216 samples past the last trigger (sample 6500 of stimulus_triggers.npy)"},
		{"samples overflow", setJSON(samples, `"num_sensor_samples": 1e300`), "recording.json: json: cannot unmarshal number 1e300"},
		{"frame too long", both(setJSON(samples, `"num_sensor_samples": 1073748000`), setTriggers(500, 1500, 2500, 3500, 4500, 5500, 1073748000)),
			"stimulus_triggers.npy: frame 5 lasts 1073742500 samples (triggers 5500 to 1073748000), longer than the limit of 1048576"},
		{"late first trigger", both(setJSON(samples, `"num_sensor_samples": 16787000`), setTriggers(16777217, 16778000, 16779000, 16780000, 16781000, 16782000, 16783000)),
			"stimulus_triggers.npy: first trigger at sample 16777217: more than 16777216 samples of recording before the stimulus"},
		{"frames huge", setJSON(`"frames": 6`, `"frames": 9223372036854775807`), "stimulus_pattern.npy: 6 frames but recording.json says stimulus.frames = 9223372036854775807"},
		{"spikes huge", setJSON(`"spikes": 5`, `"spikes": 9223372036854775807`), "recording.json: cells[0] (cluster 3) says 9223372036854775807 spikes but spike_offsets.npy gives 5"},
		{"json too large", func(f map[string][]byte) {
			f[FileJSON] = append([]byte(js), bytes.Repeat([]byte(" "), maxJSONBytes)...)
		}, fmt.Sprintf("recording.json: %d bytes, larger than 16777216 bytes", len(js)+maxJSONBytes)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range base {
				files[k] = v
			}
			tc.mutate(files)
			dir := t.TempDir()
			for n, b := range files {
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := LoadRaw(dir)
			if err == nil {
				t.Fatal("LoadRaw accepted the recording")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
			if _, err := Load(dir); err == nil {
				t.Fatal("Load accepted the recording")
			}
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > maxAllocBytes {
				t.Errorf("loading allocated %d bytes, want at most %d", d, maxAllocBytes)
			}
		})
	}
}

func TestLoadNotADirectory(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "no such directory") {
		t.Errorf("missing dir: err = %v", err)
	}
	if _, err := Load(filepath.Join(shippedDir, FileJSON)); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as dir: err = %v", err)
	}
}
