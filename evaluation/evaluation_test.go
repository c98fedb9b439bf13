package evaluation

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rollout"
)

// scores builds per-cell scores with cluster ids 0..n-1 from per-metric
// values (NLL, Van Rossum, Schreiber, Pearson), each of length n.
func scores(nll, vr, sch, pe []float64) []CellScores {
	c := make([]CellScores, len(nll))
	for i := range c {
		c[i] = CellScores{ClusterID: i, NLL: nll[i], VanRossum: vr[i], Schreiber: sch[i], Pearson: pe[i], Windows: i + 1}
	}
	return c
}

func TestParseSpec(t *testing.T) {
	rec := &rgc.Recording{Name: "r", Cells: []rgc.Cell{{ClusterID: 7}, {ClusterID: 9}}}
	env := SpecEnv{Rec: rec, Data: "dir", Cells: []int{0, 1}, Batch: 4}
	for _, tc := range []struct {
		spec, name, kind string
		repeats          int
		err              string
	}{
		{"zero", "zero", "zero", 1, ""},
		{"zero-pooled", "zero-pooled", "zero-pooled", 1, ""},
		{"oracle", "oracle", "oracle", 1, ""},
		{"glm:fit.json", "glm", "glm", 1, ""},
		{"glm-bins:fit.json", "glm-bins", "glm-bins", 1, ""},
		{"glm-bins:", "", "", 0, "want zero"},
		{"ckpt:runs/a.ckpt", "a", "checkpoint", 1, ""},
		{"ckpt:b1.ckpt,b2.ckpt", "b1 (x2)", "checkpoint", 2, ""},
		{"ckpt:a.ckpt,", "", "", 0, "empty file name"},
		{"ckpt:", "", "", 0, "empty file name"},
		{"glm:", "", "", 0, "want zero"},
		{"zero:x", "", "", 0, "want zero"},
		{"nope", "", "", 0, "want zero"},
		{"mix:ckpt:a.ckpt+glm:g.json", "mix", "mix", 1, ""},
		{"mix:ens=ckpt:a.ckpt+ckpt:b.ckpt+ckpt:c.ckpt", "ens", "mix", 1, ""},
		{"mix:0.65*ckpt:a.ckpt+0.35*zero", "mix", "mix", 1, ""},
		{"mix:ckpt:a.ckpt", "", "", 0, "at least two members"},
		{"mix:ckpt:a.ckpt,b.ckpt+zero", "", "", 0, "has 2 repeats"},
		{"mix:-1*zero+zero", "", "", 0, `weight "-1"`},
		{"mix:x*zero+zero", "", "", 0, `weight "x"`},
		{"mix:zero+mix:zero+zero", "", "", 0, "cannot be a mixture"},
		{"mix:=zero+zero", "", "", 0, "empty name"},
		{"mix:zero+nope", "", "", 0, "want zero"},
		{"mix:", "", "", 0, "want zero"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			sp, err := ParseSpec(tc.spec, env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sp.Name != tc.name || sp.Kind != tc.kind || len(sp.Open) != tc.repeats {
				t.Errorf("spec %+v: want name %q, kind %q, %d repeats", sp, tc.name, tc.kind, tc.repeats)
			}
		})
	}
}

func TestAverageRepeats(t *testing.T) {
	a := scores([]float64{1, 2}, []float64{3, 4}, []float64{0.5, 0.25}, []float64{0.1, 0.2})
	b := scores([]float64{2, 4}, []float64{1, 0}, []float64{0.5, 0.75}, []float64{0.3, -0.2})
	b[0].Windows, b[1].Windows = 4, 5 // a: 1, 2
	b[0].GeneratedSpikes = 10
	for _, tc := range []struct {
		name string
		reps [][]CellScores
		want []CellScores
	}{
		{"one repeat as it is", [][]CellScores{a}, a},
		{"two repeats averaged per cell", [][]CellScores{a, b}, []CellScores{
			{ClusterID: 0, NLL: 1.5, VanRossum: 2, Schreiber: 0.5, Pearson: 0.2, GeneratedSpikes: 5, Windows: 3}, // (1+4)/2 rounds to 3
			{ClusterID: 1, NLL: 3, VanRossum: 2, Schreiber: 0.5, Pearson: 0, GeneratedSpikes: 0, Windows: 4}}},   // (2+5)/2 rounds to 4
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AverageRepeats(tc.reps)
			if len(got) != len(tc.want) {
				t.Fatalf("%d cells, want %d", len(got), len(tc.want))
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				for _, m := range MetricNames {
					if math.Abs(g.Metric(m)-w.Metric(m)) > 1e-12 {
						t.Errorf("cell %d %s: %v, want %v", i, m, g.Metric(m), w.Metric(m))
					}
				}
				if g.ClusterID != w.ClusterID || g.Windows != w.Windows || math.Abs(g.GeneratedSpikes-w.GeneratedSpikes) > 1e-12 {
					t.Errorf("cell %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	cells := scores([]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, []float64{0, 0, 0, 0}, []float64{0.5, 0.5, 0.5, 0.5})
	for _, tc := range []struct {
		name      string
		names     []string
		resamples int
		err       string
	}{
		{"all metrics", MetricNames, rollout.DefaultResamples, ""},
		{"rollout metrics", RolloutMetricNames, rollout.DefaultResamples, ""},
		{"too few resamples", MetricNames, 10, "resamples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err := SummariseMetrics(cells, tc.names, tc.resamples, 1)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(sum) != len(tc.names) {
				t.Fatalf("%d summaries, want %d", len(sum), len(tc.names))
			}
			for _, m := range tc.names {
				vals := make([]float64, len(cells))
				for i := range cells {
					vals[i] = cells[i].Metric(m)
				}
				want, _ := rollout.Bootstrap(vals, tc.resamples, 1)
				if sum[m] != want {
					t.Errorf("%s: %+v, want rollout.Bootstrap's %+v", m, sum[m], want)
				}
			}
		})
	}
}

func TestCompare(t *testing.T) {
	base := scores([]float64{1, 2, 3, 4}, []float64{1, 1, 1, 1}, []float64{0.5, 0.5, 0.5, 0.5}, []float64{0, 0, 0, 0})
	for _, tc := range []struct {
		name                 string
		b                    []CellScores
		metric               string
		aBetter, ties        int
		mean, iqmTol, wantIQ float64
		err                  string
	}{
		// Differences A - B of NLL: -0.5, -0.5, 0, 1 (lower is better).
		{"nll", scores([]float64{1.5, 2.5, 3, 3}, []float64{1, 1, 1, 1}, []float64{0.5, 0.5, 0.5, 0.5}, []float64{0, 0, 0, 0}),
			"nll", 2, 1, 0, 1e-12, -0.25, ""},
		// Differences of Schreiber: 0.1, -0.1, 0, 0.4 (higher is better).
		{"schreiber", scores([]float64{1, 2, 3, 4}, []float64{1, 1, 1, 1}, []float64{0.4, 0.6, 0.5, 0.1}, []float64{0, 0, 0, 0}),
			"schreiber", 2, 1, 0.1, 1e-12, 0.05, ""},
		{"different cells", base[:3], "nll", 0, 0, 0, 0, 0, "3 cells"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compare("a - b", "a", "b", base, tc.b, rollout.DefaultResamples, 1)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := c.Metrics[tc.metric]
			if d.ABetter != tc.aBetter || d.Ties != tc.ties || d.LowerIsBetter != LowerIsBetter(tc.metric) || d.N != len(base) ||
				math.Abs(d.Mean-tc.mean) > 1e-12 || math.Abs(d.IQM-tc.wantIQ) > tc.iqmTol || !(d.Lo <= d.IQM && d.IQM <= d.Hi) {
				t.Errorf("%s difference %+v: want %d better, %d ties, mean %v, IQM %v", tc.metric, d, tc.aBetter, tc.ties, tc.mean, tc.wantIQ)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	sum := map[string]rollout.Summary{"nll": {IQM: 1.5, Lo: 1, Hi: 2}, "van_rossum": {IQM: 3, Lo: 2, Hi: 4},
		"schreiber": {IQM: 0.1, Lo: 0, Hi: 0.2}, "pearson": {IQM: 0.2, Lo: -1, Hi: 0.5}}
	noNLL := map[string]rollout.Summary{"van_rossum": sum["van_rossum"], "schreiber": sum["schreiber"], "pearson": sum["pearson"]}
	sc := Scoring{Recording: "rec", Split: "test", Bins: [2]int{1024, 5000}, SigmaMs: 60, TauBins: 59.51, Resamples: 2000}
	for _, tc := range []struct {
		name  string
		table Table
		want  []string // substrings of the output's lines, in order
	}{
		{"plain", Table{Scoring: sc, Rows: []Row{{Name: "zero", Cells: 4, Summary: sum}}}, []string{
			"rec, split test, rollout bins [1024, 5000), smoothing 60 ms (59.51 bins); IQM over cells [95% bootstrap CI, 2000 resamples]",
			"model  cells  NLL (nats)                  Van Rossum                  Schreiber                   Pearson",
			"zero       4  1.5000 [1.0000, 2.0000]     3.0000 [2.0000, 4.0000]     0.1000 [0.0000, 0.2000]     0.2000 [-1.0000, 0.5000]"}},
		{"missing metric is n/a", Table{Scoring: sc, Rows: []Row{{Name: "replay", Cells: 2, Summary: noNLL}}}, []string{
			"IQM over cells", "model", "replay      2  n/a                         3.0000 [2.0000, 4.0000]"}},
		{"extra columns and clauses", Table{Scoring: sc, Clauses: []string{"budget per run 10 steps"}, Note: "averaged",
			Lead: []string{"seeds"}, Trail: []string{"train/run"}, Rows: []Row{{Name: "gpt", Cells: 3, Summary: sum, Lead: []string{"2"}, Trail: []string{"5 s"}}}}, []string{
			"(59.51 bins); budget per run 10 steps; IQM over cells [95% bootstrap CI, 2000 resamples], averaged",
			"model  seeds  cells  NLL (nats)", "Pearson                     train/run",
			"gpt        2      3  1.5000 [1.0000, 2.0000]", "0.2000 [-1.0000, 0.5000]    5 s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteTable(&b, &tc.table)
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) != 2+len(tc.table.Rows) {
				t.Fatalf("%d lines, want heading, header and %d rows:\n%s", len(lines), len(tc.table.Rows), b.String())
			}
			at := 0
			for _, w := range tc.want {
				for at < len(lines) && !strings.Contains(lines[at], w) {
					at++
				}
				if at == len(lines) {
					t.Fatalf("no line (in order) contains %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// TestCheckpointSpecPrecision: a checkpoint spec opens its engine in the
// environment's arithmetic (bf16 on any CPU), and refuses an unknown one.
func TestCheckpointSpecPrecision(t *testing.T) {
	const ckpt = "../models/gpt-a-cat-cpu.ckpt"
	ck, err := model.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	ids := ck.CellIDs[:2]
	for _, tc := range []struct {
		prec engine.Precision
		want engine.Precision
		err  bool
	}{{"", engine.FP32, false}, {engine.FP32, engine.FP32, false}, {engine.BF16, engine.BF16, false}, {"fp8", "", true}} {
		sp := CheckpointSpec([]string{ckpt}, ids, 4, 1, tc.prec, rgc.StimCausal)
		p, closeFn, err := sp.Open[0]()
		if tc.err {
			if err == nil {
				closeFn()
				t.Errorf("precision %q: no error", tc.prec)
			}
			continue
		}
		if err != nil {
			t.Fatalf("precision %q: %v", tc.prec, err)
		}
		if got := p.(*engine.Engine).Precision(); got != tc.want {
			t.Errorf("precision %q: engine runs %s, want %s", tc.prec, got, tc.want)
		}
		closeFn()
	}
}
