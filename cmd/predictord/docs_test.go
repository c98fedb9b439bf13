package main

import (
	"encoding/json"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/base/cli/clitest"
	"rgcpred/serve/service"
)

// Paths of the operator's documents, from this package's directory.
const (
	operationsDoc = "../../docs/operations.md"
	dashboardFile = "../../deploy/grafana/predictord.json"
)

// helpFlags returns the flag names --help lists.
func helpFlags(t *testing.T) []string {
	t.Helper()
	usage := clitest.Help(t, func() error {
		_, err := parseFlags([]string{"--help"}, io.Discard)
		return err
	})
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(usage, -1) {
		names = append(names, m[1])
	}
	return names
}

// exportedMetrics returns the name of every metric a running daemon
// registers: the command's own and the service's.
func exportedMetrics(t *testing.T) []string {
	t.Helper()
	reg, _ := newRegistry()
	_, err := service.New(service.Config{Devices: []string{"dev0"}, Load: fakeLoader([]int{1, 2}), Registry: reg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([a-zA-Z0-9_:]+)"`)
	var names []string
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("descriptor without a name: %s", d)
		}
		names = append(names, m[1])
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// documented reports whether doc names word as a whole word (not as the
// prefix of a longer name).
func documented(doc, word string) bool {
	return regexp.MustCompile(regexp.QuoteMeta(word) + `([^a-z0-9_-]|$)`).MatchString(doc)
}

// TestOperationsDoc: every flag --help lists and every metric the daemon
// exports is in docs/operations.md.
func TestOperationsDoc(t *testing.T) {
	b, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	flags := helpFlags(t)
	if len(flags) < 30 || !slices.Contains(flags, "nats-url") {
		t.Fatalf("--help lists %d flags %v: the usage parser found too few", len(flags), flags)
	}
	for _, f := range flags {
		if !documented(doc, "`--"+f) {
			t.Errorf("flag --%s is in --help but not in %s (as `--%s`)", f, operationsDoc, f)
		}
	}
	metrics := exportedMetrics(t)
	if len(metrics) < 20 || !slices.Contains(metrics, "predictord_frames_total") ||
		!slices.Contains(metrics, "predictord_log_lines_dropped_total") {
		t.Fatalf("exported metrics %v: want the service's and the command's", metrics)
	}
	for _, m := range metrics {
		if !documented(doc, m) {
			t.Errorf("metric %s is exported but not in %s", m, operationsDoc)
		}
	}
}

func TestDocumented(t *testing.T) {
	doc := "`--nats-url` and `--nats-pass-file`; predictord_frames_total, predictord_lag_bins."
	for _, c := range []struct {
		word string
		want bool
	}{
		{"`--nats-url", true},
		{"`--nats-pass-file", true},
		{"`--nats-pass", false},
		{"`--nats", false},
		{"predictord_frames_total", true},
		{"predictord_frames", false},
		{"predictord_lag_bins", true},
	} {
		if got := documented(doc, c.word); got != c.want {
			t.Errorf("documented(%q) = %v, want %v", c.word, got, c.want)
		}
	}
}

// dashboardExprs returns every PromQL expression of the dashboard (panel
// targets, annotations, template variable queries).
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return exprs
}

// TestDashboardMetrics: the Grafana dashboard refers only to metrics the
// daemon exports (a histogram through its _bucket, _sum and _count series)
// and shows the operator's essentials.
func TestDashboardMetrics(t *testing.T) {
	exported := map[string]bool{}
	for _, m := range exportedMetrics(t) {
		exported[m] = true
	}
	used := map[string]bool{}
	name := regexp.MustCompile(`predictord_[a-zA-Z0-9_]+`)
	exprs := dashboardExprs(t)
	for _, e := range exprs {
		for _, m := range name.FindAllString(e, -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(m, suffix); ok && exported[b] {
					base = b
				}
			}
			if !exported[base] {
				t.Errorf("dashboard expression %q refers to %s, which the daemon does not export", e, m)
			}
			used[base] = true
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("found %d expressions in %s: want the panels' queries", len(exprs), dashboardFile)
	}
	for _, m := range []string{
		"predictord_frames_total", "predictord_frames_rejected_total", "predictord_decision_latency_seconds",
		"predictord_decisions_skipped_total", "predictord_lag_bins", "predictord_batch_size",
		"predictord_reloads_total", "predictord_nats_events_total", "predictord_ready",
	} {
		if !used[m] {
			t.Errorf("dashboard does not show %s", m)
		}
	}
	joined := strings.Join(exprs, "\n")
	for _, want := range []string{
		"by (device, reason)",
		"histogram_quantile(0.99, sum by (le, device) (rate(predictord_decision_latency_seconds_bucket",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("dashboard lacks %q (rejects by reason, latency quantiles)", want)
		}
	}
}
