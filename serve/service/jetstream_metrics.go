package service

import (
	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/serve/jsreplicas"
	"rgcpred/serve/jsstart"
)

// jsFeatures are the labels of jetstream_start_retries_total: the
// JetStream features that open something at start (JetStreamFeatures).
var jsFeatures = []string{"standby", "record"}

// newStartRetries registers predictord_jetstream_start_retries_total,
// each feature and reason at 0.
func newStartRetries(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "predictord", Name: "jetstream_start_retries_total",
		Help: "Tries at start-up to open the lease bucket, read the lease (standby) or open the recording stream (record) that failed and were tried again, by why: timeout, no_responders, unavailable (no meta leader), disconnected (the connection down), placement (the cluster cannot place the replicas yet)."},
		[]string{"feature", "reason"})
	reg.MustRegister(c)
	for _, f := range jsFeatures {
		for _, r := range jsstart.Reasons {
			c.WithLabelValues(f, r)
		}
	}
	return c
}

// startRetried counts and logs a failed try of feature at start-up that
// is tried again.
func (s *Service) startRetried(feature, msg string, err error) {
	if r := jsstart.Reason(err); r != "" {
		s.m.startRetries.WithLabelValues(feature, r).Inc()
	}
	s.limiter.warn(&s.log, feature+"/start", 1, msg+err.Error())
}

// placementMetrics sends the gauges of a stream's replicas at start-up:
// replicas with its has and wanted counts, short with 1 on the reason it
// has fewer (jsreplicas.Reasons; all 0 when it has them); name is the
// first label of both.
func placementMetrics(ch chan<- prometheus.Metric, replicas, short *prometheus.Desc, name string, p jsreplicas.Placement) {
	ch <- prometheus.MustNewConstMetric(replicas, prometheus.GaugeValue, float64(p.Have), name, "has")
	ch <- prometheus.MustNewConstMetric(replicas, prometheus.GaugeValue, float64(p.Want), name, "wanted")
	for _, r := range jsreplicas.Reasons {
		if r == jsreplicas.ReasonNone {
			continue
		}
		v := 0.0
		if p.Reason() == r {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(short, prometheus.GaugeValue, v, name, r)
	}
}

// recordReplicasCollector exports the recording stream's replicas at
// start-up.
type recordReplicasCollector struct {
	stream string
	placed jsreplicas.Placement
}

var (
	recordReplicasDesc = prometheus.NewDesc("predictord_record_replicas",
		"Replicas of the flight recorder's stream at start-up: has (the stream's) and wanted (3 on a cluster, else 1).",
		[]string{"stream", "count"}, nil)
	recordReplicasShortDesc = prometheus.NewDesc("predictord_record_replicas_short",
		"1 on the reason the flight recorder's stream has fewer replicas than wanted, the server's answer to the count wanted at the end of the start-up wait: no_peers (fewer nodes current in the cluster), insufficient_resources, not_clustered (a single server), other; all 0 when it has them.",
		[]string{"stream", "reason"}, nil)
)

func (c *recordReplicasCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- recordReplicasDesc
	ch <- recordReplicasShortDesc
}

func (c *recordReplicasCollector) Collect(ch chan<- prometheus.Metric) {
	placementMetrics(ch, recordReplicasDesc, recordReplicasShortDesc, c.stream, c.placed)
}
