package service

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/serve/recorder"
	"rgcpred/stream"
)

// fills runs the flight recorder's fillers (recorder.Filler): each served
// and recorded device logs what its subjects carry (frames and control
// messages as the processor handles them, resend answers, the decisions
// and events coming back from the server), and stores again what the
// recording lacks: the instance that publishes (a group's lease holder; a
// single instance) after 2 s, a standby after 10 s (recorder.FillConfig).
type fills struct {
	subs    []*nats.Subscription
	fillers map[string]*recorder.Filler
}

// logFills gives every recorded device a fill log and subscribes to its
// decisions and events for it (call before Run).
func (r *recording) logFills(nc *nats.Conn) error {
	r.fills = &fills{fillers: map[string]*recorder.Filler{}}
	for _, d := range r.s.devices {
		if !slices.Contains(r.devices, d.name) {
			continue
		}
		d.fill = recorder.NewLog(recorder.LogKeep)
		for _, subj := range []string{stream.SpikesSubject(d.name), stream.EventsSubject(d.name)} {
			log := d.fill
			sub, err := nc.Subscribe(subj, func(m *nats.Msg) { log.Add(m, subj) })
			if err != nil {
				r.stopFills()
				return fmt.Errorf("service: record: subscribe %s: %w", subj, err)
			}
			r.fills.subs = append(r.fills.subs, sub)
		}
	}
	return nil
}

// startFills runs a filler per logged device until ctx ends; done is
// closed once they returned. Call it after the standby group is on: a
// group's standby fills later than its holder.
func (r *recording) startFills(ctx context.Context, js jetstream.JetStream, cfg recorder.Config) (done <-chan struct{}, err error) {
	var wg sync.WaitGroup
	for _, d := range r.s.devices {
		if d.fill == nil {
			continue
		}
		d := d
		f := recorder.NewFiller(js, recorder.FillConfig{Stream: cfg.Stream, Device: d.name, Log: d.fill, Every: cfg.FillEvery, Settle: cfg.FillSettle,
			Holder: func() bool { return d.sb == nil || d.sb.Gate().Active() },
			Warn: func(err error) {
				r.s.limiter.warn(&r.s.log, d.name+"/record_fill", 1, "flight recorder: "+err.Error(), devField(d.name))
			},
			Filled: func(n int) {
				r.s.limiter.info(&r.s.log, d.name+"/record_filled", uint64(n),
					"flight recorder: messages the stream did not store stored again (rgcrec.DEVICE.fill)", devField(d.name))
			}})
		r.fills.fillers[d.name] = f
		wg.Add(1)
		go func() { defer wg.Done(); f.Run(ctx) }()
	}
	if err := r.s.reg.Register(&fillCollector{f: r.fills}); err != nil {
		return nil, fmt.Errorf("service: record: metrics: %w", err)
	}
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch, nil
}

// stopFills ends the fill logs' subscriptions.
func (r *recording) stopFills() {
	if r.fills == nil {
		return
	}
	for _, s := range r.fills.subs {
		_ = s.Unsubscribe()
	}
	r.fills.subs = nil
}

// fillCollector exports the fillers' counters.
type fillCollector struct{ f *fills }

var (
	recordFilledDesc = prometheus.NewDesc("predictord_record_filled_total",
		"Messages of the device this instance stored again in the flight recorder's stream because the recording lacked them (a stream electing a leader, or cut off).",
		[]string{"device"}, nil)
	recordFillLostDesc = prometheus.NewDesc("predictord_record_fill_lost_total",
		"Messages of the device that left this instance's fill log before they were checked against the recording (a hole older than the log's span): if the recording lacks them, the hole stays.",
		[]string{"device"}, nil)
)

func (c *fillCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- recordFilledDesc
	ch <- recordFillLostDesc
}

func (c *fillCollector) Collect(ch chan<- prometheus.Metric) {
	for name, f := range c.f.fillers {
		st := f.Stats()
		ch <- prometheus.MustNewConstMetric(recordFilledDesc, prometheus.CounterValue, float64(st.Filled), name)
		ch <- prometheus.MustNewConstMetric(recordFillLostDesc, prometheus.CounterValue, float64(st.Lost), name)
	}
}
