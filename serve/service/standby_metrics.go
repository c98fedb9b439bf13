package service

import (
	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/serve/standby"
)

// standbyCollector exports the hot-standby state: who holds the lease,
// the lease bucket's replicas, each device's sync state and its gate's
// counters.
type standbyCollector struct {
	s *Service
	g *standby.Group
}

var (
	standbyHolderDesc = prometheus.NewDesc("predictord_standby_holder",
		"1 while this instance holds its replica group's lease and publishes, else 0.", []string{"group", "id"}, nil)
	standbyTakeoversDesc = prometheus.NewDesc("predictord_standby_takeovers_total",
		"Times this instance took its replica group's lease.", []string{"group"}, nil)
	standbySyncedDesc = prometheus.NewDesc("predictord_standby_synced",
		"1 once the device's state is the group's (it may take over), else 0.", []string{"device"}, nil)
	standbyMessagesDesc = prometheus.NewDesc("predictord_standby_messages_total",
		"Decision and event messages by fate: published, held (kept as standby), flushed (kept, then published at a takeover), matched (kept, then dropped: the holder's copy seen), overflow (kept, then dropped from a full standby buffer), discarded (kept, then dropped at a takeover as already published; non-zero is a loss), suppressed (not kept: already published), replaced (kept, or published and awaiting its echo, then dropped: this instance restored the holder's state).",
		[]string{"device", "fate"}, nil)
	standbyIgnoredDesc = prometheus.NewDesc("predictord_standby_ignored_total",
		"Positions observed on the device's decision and event subjects and ignored: ahead (implausibly far ahead of this instance's own: forged, or this instance trails far behind), foreign (another group or shard, or none), auth_missing and auth_invalid (with message keys: without a valid authenticator under the device's Down key, a forger's).",
		[]string{"device", "reason"}, nil)
	standbyAlarmsDesc = prometheus.NewDesc("predictord_standby_alarms_total",
		"Alarms raised by this instance, by reason: divergence (a state digest or stream event differs from the holder's; the replica catches up again), state_refused (a state answer claiming the lease not from its holder), lease_foreign (a lease entry written by no instance, refused).",
		[]string{"group", "reason"}, nil)
	standbyResendDesc = prometheus.NewDesc("predictord_standby_resend_requests_total",
		"The device's decisions resend requests this instance answered as holder, by outcome: answered, gap (answered, but the messages right after the requested position were no longer kept: lost), or refused: auth_missing and auth_invalid (with message keys: no valid authenticator under the device's Up key), replayed (sent no later than the last one accepted), malformed (no position), limited (the rate budget was spent).",
		[]string{"device", "outcome"}, nil)
	standbyResentDesc = prometheus.NewDesc("predictord_standby_resent_messages_total",
		"Decisions messages this instance published again for the device's resend requests.", []string{"device"}, nil)
	standbyGapCopiesDesc = prometheus.NewDesc("predictord_standby_gap_copies_total",
		"Decisions messages this instance published again after a gap in the device's frames, because the link that lost the frames may have lost them on their way to the device.",
		[]string{"device"}, nil)
	standbyEchoDesc = prometheus.NewDesc("predictord_standby_echo_messages_total",
		"Messages this instance published as holder, by what became of their echo (the message coming back from the server): echoed (it, or a later position, came back), republished (never came back, published again after a reconnect: written into a connection that died), dropped (the echo ring was full before it came; lost if the connection then died with it).",
		[]string{"device", "fate"}, nil)
	standbyLeaseReplicasDesc = prometheus.NewDesc("predictord_standby_lease_replicas",
		"Replicas of the lease bucket at start-up: has (the bucket's) and wanted (--standby-replicas; by default 3 on a cluster, else 1).",
		[]string{"group", "count"}, nil)
	standbyLeaseShortDesc = prometheus.NewDesc("predictord_standby_lease_replicas_short",
		"1 on the reason the lease bucket has fewer replicas than wanted, the server's answer to the count wanted at the end of the start-up wait: no_peers (fewer nodes current in the cluster), insufficient_resources, not_clustered (a single server), other; all 0 when it has them.",
		[]string{"group", "reason"}, nil)
	standbyRestoresDesc = prometheus.NewDesc("predictord_standby_restores_total",
		"Times the device restored the holder's state (joining, or catching up again after a divergence).", []string{"device"}, nil)
)

func (c *standbyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- standbyHolderDesc
	ch <- standbyTakeoversDesc
	ch <- standbySyncedDesc
	ch <- standbyMessagesDesc
	ch <- standbyIgnoredDesc
	ch <- standbyEchoDesc
	ch <- standbyAlarmsDesc
	ch <- standbyRestoresDesc
	ch <- standbyResendDesc
	ch <- standbyResentDesc
	ch <- standbyGapCopiesDesc
	ch <- standbyLeaseReplicasDesc
	ch <- standbyLeaseShortDesc
}

func (c *standbyCollector) Collect(ch chan<- prometheus.Metric) {
	ls := c.g.Lease().Status()
	cfg := c.g.Config()
	held := 0.0
	if ls.Held {
		held = 1
	}
	ch <- prometheus.MustNewConstMetric(standbyHolderDesc, prometheus.GaugeValue, held, cfg.Group, cfg.ID)
	ch <- prometheus.MustNewConstMetric(standbyTakeoversDesc, prometheus.CounterValue, float64(ls.Gains), cfg.Group)
	placementMetrics(ch, standbyLeaseReplicasDesc, standbyLeaseShortDesc, cfg.Group, c.g.Placement())
	alarms := c.g.Alarms()
	for _, r := range standby.AlarmReasons {
		ch <- prometheus.MustNewConstMetric(standbyAlarmsDesc, prometheus.CounterValue, float64(alarms[r]), cfg.Group, r)
	}
	for _, d := range c.s.devices {
		synced := 0.0
		if d.sb.Synced() {
			synced = 1
		}
		ch <- prometheus.MustNewConstMetric(standbySyncedDesc, prometheus.GaugeValue, synced, d.name)
		ch <- prometheus.MustNewConstMetric(standbyRestoresDesc, prometheus.CounterValue, float64(d.sb.Restores()), d.name)
		gs := d.sb.Gate().Stats()
		for _, f := range []struct {
			fate string
			n    uint64
		}{{"published", gs.Published}, {"held", gs.Held}, {"flushed", gs.Flushed}, {"matched", gs.Matched}, {"overflow", gs.Overflow},
			{"discarded", gs.Discarded}, {"suppressed", gs.Suppressed}, {"replaced", gs.Replaced}} {
			ch <- prometheus.MustNewConstMetric(standbyMessagesDesc, prometheus.CounterValue, float64(f.n), d.name, f.fate)
		}
		ch <- prometheus.MustNewConstMetric(standbyEchoDesc, prometheus.CounterValue, float64(gs.Echoed), d.name, "echoed")
		ch <- prometheus.MustNewConstMetric(standbyEchoDesc, prometheus.CounterValue, float64(gs.Republished), d.name, "republished")
		ch <- prometheus.MustNewConstMetric(standbyEchoDesc, prometheus.CounterValue, float64(gs.EchoOverflow), d.name, "dropped")
		ch <- prometheus.MustNewConstMetric(standbyIgnoredDesc, prometheus.CounterValue, float64(gs.Ahead), d.name, "ahead")
		ch <- prometheus.MustNewConstMetric(standbyIgnoredDesc, prometheus.CounterValue, float64(gs.Foreign), d.name, "foreign")
		ch <- prometheus.MustNewConstMetric(standbyIgnoredDesc, prometheus.CounterValue, float64(gs.AuthMissing), d.name, "auth_missing")
		ch <- prometheus.MustNewConstMetric(standbyIgnoredDesc, prometheus.CounterValue, float64(gs.AuthInvalid), d.name, "auth_invalid")
		rs := d.sb.ResendStats()
		ch <- prometheus.MustNewConstMetric(standbyResendDesc, prometheus.CounterValue, float64(rs.Answered), d.name, "answered")
		ch <- prometheus.MustNewConstMetric(standbyResendDesc, prometheus.CounterValue, float64(rs.Gaps), d.name, "gap")
		for _, k := range standby.ResendRefusals {
			ch <- prometheus.MustNewConstMetric(standbyResendDesc, prometheus.CounterValue, float64(rs.Refused[k]), d.name, k)
		}
		ch <- prometheus.MustNewConstMetric(standbyResentDesc, prometheus.CounterValue, float64(rs.Resent), d.name)
		ch <- prometheus.MustNewConstMetric(standbyGapCopiesDesc, prometheus.CounterValue, float64(d.sb.GapCopies()), d.name)
	}
}
