package service

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricsStartAtZero: after a device is set up, every counter with
// known labels has its series at 0 (a scrape or a grep finds it before the
// first event), each rejection reason included, and operations.md names
// every rejection reason.
func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, func(func(string, float64)) {})
	m.initDevice("dev0")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]bool{} // family -> label set -> seen
	for _, f := range fams {
		if f.GetType() != dto.MetricType_COUNTER {
			continue
		}
		series[f.GetName()] = map[string]bool{}
		for _, s := range f.GetMetric() {
			if v := s.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s%v = %v, want 0", f.GetName(), s.GetLabel(), v)
			}
			var kv []string
			for _, l := range s.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
			}
			series[f.GetName()][strings.Join(kv, ",")] = true
		}
	}
	want := map[string][]string{
		"predictord_frames_total":                {"device=dev0"},
		"predictord_decisions_skipped_total":     {"device=dev0"},
		"predictord_predictions_total":           {"device=dev0"},
		"predictord_spikes_total":                {"device=dev0"},
		"predictord_predict_errors_total":        {"device=dev0"},
		"predictord_frames_repaired_total":       {"device=dev0,reason=clamped"},
		"predictord_reloads_total":               {"result=ok", "result=error"},
		"predictord_nats_events_total":           {"event=disconnect", "event=reconnect", "event=slow_consumer", "event=error"},
		"predictord_resend_recovered_bins_total": {"device=dev0"},
		"predictord_resend_ignored_frames_total": {"device=dev0"},
	}
	for _, o := range ResendOutcomes {
		want["predictord_resend_requests_total"] = append(want["predictord_resend_requests_total"], "device=dev0,outcome="+o)
	}
	for _, r := range rejectReasons {
		want["predictord_frames_rejected_total"] = append(want["predictord_frames_rejected_total"], "device=dev0,reason="+r)
	}
	for fam, labels := range want {
		for _, l := range labels {
			if !series[fam][l] {
				t.Errorf("%s{%s} absent at start", fam, l)
			}
		}
	}
	if n := len(series["predictord_frames_rejected_total"]); n != len(rejectReasons) {
		t.Errorf("%d rejection series, want %d (one per reason)", n, len(rejectReasons))
	}
	if _, ok := series["predictord_deadline_misses_total"]; ok {
		t.Error("predictord_deadline_misses_total is exported: skipped decisions are predictord_decisions_skipped_total")
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rejectReasons {
		if !strings.Contains(string(doc), "`"+r+"`") {
			t.Errorf("docs/operations.md does not name the rejection reason %q", r)
		}
	}
}
