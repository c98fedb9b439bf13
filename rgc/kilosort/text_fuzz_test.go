package kilosort

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTextReaders feeds the Kilosort text readers (phy's label TSV,
// params.py, the trigger and pattern CSV) any text: each returns an error
// naming its file or a result that keeps its promises (known labels only,
// a positive finite sample rate, whole rows of numbers, integers).
func FuzzTextReaders(f *testing.F) {
	for _, s := range []string{
		"cluster_id\tgroup\n0\tgood\n1\tmua\n2\tnoise\n3\tunsorted\n",
		"cluster_id\tKSLabel\r\n5\tgood\r\n",
		"cluster_id\tgroup\n1\tgood\n1\tmua\n",
		"dat_path = 'x.bin'\nn_channels_dat = 252\nsample_rate = 17852.767845719834 # Hz\n",
		"sample_rate = -1\n", "sample_rate = inf\n", "sample_rate=1e400\n",
		"trigger\n0\n595\n1190\n", "0,1,0,1\n1,1,0,0\n", "# c\n\n1,2\n3\n", "1e308,2\n", "9007199254740993\n",
		"a,b\n\"1\",2\n", "\"unterminated\n", "",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		if labels, err := parseLabels(FileClusterGroup, text); err != nil {
			if !strings.Contains(err.Error(), FileClusterGroup) {
				t.Errorf("label error %q does not name the file", err)
			}
		} else {
			for id, l := range labels {
				switch l {
				case "good", "mua", "noise", "unsorted":
				default:
					t.Errorf("cluster %d labelled %q", id, l)
				}
			}
		}
		for _, name := range []string{FileParams, "table.csv"} {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if name == FileParams {
				r, err := readSampleRate(path)
				switch {
				case err != nil && !strings.Contains(err.Error(), path):
					t.Errorf("params error %q does not name the file", err)
				case err == nil && !(r > 0 && !math.IsInf(r, 0)):
					t.Errorf("sample rate %v accepted", r)
				}
				continue
			}
			vals, cols, err := readTable(path)
			switch {
			case err != nil && !strings.Contains(err.Error(), path):
				t.Errorf("table error %q does not name the file", err)
			case err == nil && (cols < 1 || len(vals)%cols != 0):
				t.Errorf("table of %d values in %d columns", len(vals), cols)
			}
			ints, err := readInts(path)
			switch {
			case err != nil && !strings.Contains(err.Error(), path):
				t.Errorf("integers error %q does not name the file", err)
			case err == nil && len(ints) != len(vals):
				t.Errorf("%d integers from a table of %d values", len(ints), len(vals))
			}
		}
	})
}
