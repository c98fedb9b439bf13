package kilosort

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rgcpred/rgc"
)

// fixture is a generated Kilosort/phy directory with a stimulus.
type fixture struct {
	dir, triggers, pattern string
	spikes                 map[int][]int64 // per cluster, ascending
	frames                 int
}

// writeU64Column writes a uint64 [n, 1] array, as Kilosort saves spike_times.
func writeU64Column(t *testing.T, path string, v []int64) {
	t.Helper()
	hdr := fmt.Sprintf("{'descr': '<u8', 'fortran_order': False, 'shape': (%d, 1), }", len(v))
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	b = append(b, hdr...)
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeNPY(t *testing.T, path string, data any, shape []int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rgc.WriteNPY(f, data, shape); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeText(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// makeFixture writes clusters 0 (good), 3 (mua), 5 (noise) and 7 (not in
// the labels: unsorted), spikes in time order as Kilosort writes them, and
// 200 frames of 893 samples from sample 1000 (triggers .npy, pattern .csv).
func makeFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	fx := &fixture{dir: dir, frames: 200, spikes: map[int][]int64{}}
	rng := rand.New(rand.NewPCG(1, 2))
	end := int64(1000 + 893*fx.frames)
	type spike struct {
		t int64
		c int32
	}
	var all []spike
	for _, c := range []int32{0, 3, 5, 7} {
		for range 50 + rng.IntN(50) {
			all = append(all, spike{rng.Int64N(end + 500), c})
		}
	}
	slices.SortFunc(all, func(a, b spike) int { return int(a.t - b.t) })
	times, clusters := make([]int64, len(all)), make([]int32, len(all))
	for i, s := range all {
		times[i], clusters[i] = s.t, s.c
		fx.spikes[int(s.c)] = append(fx.spikes[int(s.c)], s.t)
	}
	writeU64Column(t, filepath.Join(dir, FileSpikeTimes), times)
	writeNPY(t, filepath.Join(dir, FileSpikeClusters), clusters, nil)
	writeText(t, filepath.Join(dir, FileClusterGroup), "cluster_id\tgroup\n0\tgood\n3\tmua\n5\tnoise\n")
	writeText(t, filepath.Join(dir, FileKSLabel), "cluster_id\tKSLabel\n0\tmua\n3\tgood\n5\tgood\n7\tgood\n")
	writeText(t, filepath.Join(dir, FileParams), "dat_path = 'rec.dat'\nn_channels_dat = 252\ndtype = 'int16'\noffset = 0\nsample_rate = 17852.76785  # Hz\nhp_filtered = False\n")
	trig := make([]int64, fx.frames+1)
	var csv strings.Builder
	csv.WriteString("red,green,blue,uv\n")
	for i := range trig {
		trig[i] = 1000 + 893*int64(i)
		if i < fx.frames {
			fmt.Fprintf(&csv, "%d,%d,%d,%d\n", rng.IntN(2), rng.IntN(2), rng.IntN(2), rng.IntN(2))
		}
	}
	fx.triggers = filepath.Join(dir, "triggers.npy")
	writeNPY(t, fx.triggers, trig, nil)
	fx.pattern = filepath.Join(dir, "pattern.csv")
	writeText(t, fx.pattern, csv.String())
	return fx
}

func TestConvertLoads(t *testing.T) {
	fx := makeFixture(t)
	raw, rep, err := Convert(Options{Dir: fx.dir, Triggers: fx.triggers, Pattern: fx.pattern})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rec")
	if err := raw.Write(out); err != nil {
		t.Fatal(err)
	}
	rec, err := rgc.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	back := rec.Raw
	if got := rec.ClusterIDs(); !slices.Equal(got, []int{0, 3, 7}) {
		t.Fatalf("clusters %v, want [0 3 7] (noise 5 dropped)", got)
	}
	if got := rec.QualityClusterIDs(); !slices.Equal(got, []int{0}) {
		t.Errorf("quality clusters %v, want the good one [0]", got)
	}
	for _, c := range back.Cells {
		if !slices.Equal(c.Spikes, fx.spikes[c.ClusterID]) {
			t.Errorf("cluster %d: spikes differ from the generated ones", c.ClusterID)
		}
	}
	if back.SampleRateHz != 17852.76785 || len(back.Pattern) != fx.frames || back.Triggers[0] != 1000 {
		t.Errorf("rate %v, %d frames, first trigger %d", back.SampleRateHz, len(back.Pattern), back.Triggers[0])
	}
	if back.FrameRateHz < 19.99 || back.FrameRateHz > 20.0 {
		t.Errorf("frame rate %v, want 17852.77/893 = 19.99", back.FrameRateHz)
	}
	lastSpike := slices.Max(append(append(fx.spikes[0], fx.spikes[3]...), fx.spikes[7]...))
	if want := max(back.Triggers[fx.frames], lastSpike+1); back.NumSamples != want {
		t.Errorf("num samples %d, want %d", back.NumSamples, want)
	}
	want := Report{SampleRateHz: 17852.76785, Labels: FileClusterGroup, Clusters: 4, Kept: 3, Quality: 1, DroppedNoise: 1,
		Spikes: len(fx.spikes[0]) + len(fx.spikes[3]) + len(fx.spikes[7]), Frames: fx.frames}
	if *rep != want {
		t.Errorf("report %+v, want %+v", *rep, want)
	}
}

func TestConvertOptions(t *testing.T) {
	fx := makeFixture(t)
	cases := []struct {
		name    string
		setup   func(o *Options)
		quality []int
		cells   []int
	}{
		{"all", func(o *Options) { o.Quality.All = true }, []int{0, 3, 7}, []int{0, 3, 7}},
		{"ids", func(o *Options) { o.Quality.IDs = []int{3, 7} }, []int{3, 7}, []int{0, 3, 7}},
		{"keep noise", func(o *Options) { o.KeepNoise = true }, []int{0}, []int{0, 3, 5, 7}},
		{"KSLabel fallback", func(o *Options) { os.Remove(filepath.Join(o.Dir, FileClusterGroup)) }, []int{3, 5, 7}, []int{0, 3, 5, 7}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Dir: fx.dir, Triggers: fx.triggers, Pattern: fx.pattern}
			tc.setup(&o)
			raw, _, err := Convert(o)
			if err != nil {
				t.Fatal(err)
			}
			var q, all []int
			for _, c := range raw.Cells {
				all = append(all, c.ClusterID)
				if c.Quality {
					q = append(q, c.ClusterID)
				}
			}
			if !slices.Equal(q, tc.quality) || !slices.Equal(all, tc.cells) {
				t.Errorf("cells %v quality %v, want %v and %v", all, q, tc.cells, tc.quality)
			}
		})
	}
}

// TestStimulusFormats reads the same stimulus from CSV triggers (one per
// line, no end entry) and an .npy pattern.
func TestStimulusFormats(t *testing.T) {
	fx := makeFixture(t)
	ref, _, err := Convert(Options{Dir: fx.dir, Triggers: fx.triggers, Pattern: fx.pattern})
	if err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for _, tr := range ref.Triggers[:fx.frames] {
		fmt.Fprintln(&lines, tr)
	}
	trig := filepath.Join(t.TempDir(), "triggers.csv")
	writeText(t, trig, lines.String())
	flat := make([]int8, 0, 4*fx.frames)
	for _, f := range ref.Pattern {
		flat = append(flat, f[:]...)
	}
	pat := filepath.Join(t.TempDir(), "pattern.npy")
	writeNPY(t, pat, flat, []int{fx.frames, 4})
	raw, rep, err := Convert(Options{Dir: fx.dir, Triggers: trig, Pattern: pat})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.LastFrameEstimated || !slices.Equal(raw.Triggers, ref.Triggers) || !slices.Equal(raw.Pattern, ref.Pattern) {
		t.Errorf("CSV/npy stimulus differs (last frame estimated: %v)", rep.LastFrameEstimated)
	}
}

func TestConvertErrors(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, fx *fixture, o *Options)
		want  string
	}{
		{"no params", func(t *testing.T, fx *fixture, o *Options) { os.Remove(filepath.Join(fx.dir, FileParams)) }, "params.py"},
		{"no sample rate", func(t *testing.T, fx *fixture, o *Options) {
			writeText(t, filepath.Join(fx.dir, FileParams), "dtype = 'int16'\n")
		}, "has no sample_rate"},
		{"bad sample rate", func(t *testing.T, fx *fixture, o *Options) {
			writeText(t, filepath.Join(fx.dir, FileParams), "sample_rate = -3\n")
		}, "not a positive number"},
		{"length mismatch", func(t *testing.T, fx *fixture, o *Options) {
			writeNPY(t, filepath.Join(fx.dir, FileSpikeClusters), []int32{0, 0}, nil)
		}, "spike_clusters.npy has 2"},
		{"no labels", func(t *testing.T, fx *fixture, o *Options) {
			os.Remove(filepath.Join(fx.dir, FileClusterGroup))
			os.Remove(filepath.Join(fx.dir, FileKSLabel))
		}, "choose the quality cells"},
		{"bad label", func(t *testing.T, fx *fixture, o *Options) {
			writeText(t, filepath.Join(fx.dir, FileClusterGroup), "cluster_id\tgroup\n0\tgreat\n")
		}, `label "great"`},
		{"no header", func(t *testing.T, fx *fixture, o *Options) {
			writeText(t, filepath.Join(fx.dir, FileClusterGroup), "0\tgood\n")
		}, "header"},
		{"unknown quality id", func(t *testing.T, fx *fixture, o *Options) { o.Quality.IDs = []int{42} }, "quality cluster 42 has no spikes"},
		{"pattern values", func(t *testing.T, fx *fixture, o *Options) {
			writeText(t, fx.pattern, "1,0,2,0\n1,1,1,1\n")
			writeText(t, fx.triggers+".csv", "0\n10\n20\n")
			o.Triggers = fx.triggers + ".csv"
		}, "frame 0 LED 2 is 2"},
		{"pattern columns", func(t *testing.T, fx *fixture, o *Options) { writeText(t, fx.pattern, "1,0,1\n") }, "3 columns, want 4"},
		{"trigger count", func(t *testing.T, fx *fixture, o *Options) {
			writeNPY(t, fx.triggers, []int64{1, 2, 3}, nil)
		}, "3 triggers for the 200 frames"},
		{"triggers not increasing", func(t *testing.T, fx *fixture, o *Options) {
			tr := make([]int64, 201)
			for i := range tr {
				tr[i] = int64(100 * i)
			}
			tr[50] = tr[49]
			writeNPY(t, fx.triggers, tr, nil)
		}, "triggers not increasing"},
		{"spikes past the end", func(t *testing.T, fx *fixture, o *Options) { o.NumSamples = 2000 }, "outside the recording"},
		{"2-D spike times", func(t *testing.T, fx *fixture, o *Options) {
			writeNPY(t, filepath.Join(fx.dir, FileSpikeTimes), []int64{1, 2, 3, 4}, []int{2, 2})
		}, "want a vector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := makeFixture(t)
			o := Options{Dir: fx.dir, Triggers: fx.triggers, Pattern: fx.pattern}
			tc.setup(t, fx, &o)
			_, _, err := Convert(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
