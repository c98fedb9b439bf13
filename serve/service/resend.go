package service

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// resendQueueLen is the room for a device's resend answers waiting for
// the processor: the core waits for one gap at a time, of up to
// daemon.MaxResendGap frames asked for in requests of
// stream.MaxResendFrames (16), so twice their number (32 answers, 768
// KiB at most) covers late answers.
const resendQueueLen = 2 * daemon.MaxResendGap / stream.MaxResendFrames

// ResendOutcomes are the outcome labels of predictord_resend_requests_total
// (daemon.ResendStats), each created at 0.
// ("tail": the requests for the frames after a silent stream's last one,
// daemon.Core.AskTail).
var ResendOutcomes = []string{"answered", "partial", "none", "timeout", "tail"}

// resender asks a device for the frames of a gap (docs/protocol.md,
// "Resend") for its core (daemon.Resender): the request goes out on the
// device's resend subject with a reply subject of the device's own
// (prefix.<first>.<count>). The reader checks the answers like frames and
// queues them apart from the work queue: the processor takes them first,
// since the frames queued meanwhile wait for them.
type resender struct {
	prefix  string // the reply subjects' prefix, ending in "."
	msg     nats.Msg
	buf     []byte
	answers chan item
	// held are the requests asked for while the connection was down,
	// sent once it is back (sendHeld); sent says a request went out
	// during the message being processed (the core's wait runs from then).
	held [heldLen]heldRequest
	nh   int
	sent bool
	// reconnects is the connection's reconnect count last seen (tailAfterReconnect).
	reconnects uint64
	// metrics
	outcomes  [5]prometheus.Counter
	recovered prometheus.Counter
	ignored   prometheus.Counter
	prev      daemon.ResendStats
}

// heldLen bounds the requests held while the connection is down: a
// gap's (up to 16) and a tail's.
const heldLen = daemon.MaxResendGap/stream.MaxResendFrames + 1

// heldRequest is a resend request held until the connection is back.
type heldRequest struct {
	first int64
	count int
}

func newResender(m *metrics, device string) *resender {
	r := &resender{prefix: nats.NewInbox() + ".", buf: make([]byte, 0, stream.ResendLen), answers: make(chan item, resendQueueLen),
		recovered: m.resendRecovered.WithLabelValues(device), ignored: m.resendIgnored.WithLabelValues(device)}
	for i, o := range ResendOutcomes {
		r.outcomes[i] = m.resendRequests.WithLabelValues(device, o)
	}
	return r
}

// Resend implements daemon.Resender (on the processor goroutine): it
// publishes the request, signed with the Down key when keys are
// configured, and never waits for the answer. While the connection is
// down the request is held and sent once it is back (sendHeld), so the
// frames are asked for after the reconnect rather than not at all.
func (k *sink) Resend(first int64, count int) bool {
	d := k.d
	r := d.resend
	if !d.nc.IsConnected() {
		return r.hold(first, count)
	}
	if err := d.publishResend(first, count); err != nil {
		if !d.nc.IsClosed() && r.hold(first, count) {
			return true // the connection went down meanwhile
		}
		d.s.limiter.warn(&d.s.log, d.name+"/resend", 1, "resend request not sent (a gap is filled, a tail asked again later): "+err.Error(), devField(d.name))
		return false
	}
	r.sent = true
	return true
}

// publishResend publishes a request for frames first .. first+count-1.
func (d *device) publishResend(first int64, count int) error {
	r := d.resend
	b, err := stream.AppendResend(r.buf[:0], &stream.Resend{First: first, Count: count})
	if err != nil {
		return err
	}
	r.buf = b
	m := &r.msg
	m.Subject, m.Reply, m.Data = stream.ResendSubject(d.name), stream.ResendReply(r.prefix, first, count), b
	if d.down != nil {
		d.down.Sign(m)
	}
	return d.nc.PublishMsg(m)
}

// hold keeps a request until the connection is back; false when heldLen
// requests are held already. A request held already is not held twice.
func (r *resender) hold(first int64, count int) bool {
	for _, h := range r.held[:r.nh] {
		if h.first == first && h.count == count {
			return true
		}
	}
	if r.nh == len(r.held) {
		return false
	}
	r.held[r.nh] = heldRequest{first, count}
	r.nh++
	return true
}

// holding reports whether requests wait for the connection.
func (d *device) holding() bool { return d.resend != nil && d.resend.nh > 0 }

// sendHeld sends, once the connection is back (processor goroutine), the
// requests held while it was down that the core still waits for, and
// dates the core's wait from now (daemon.Core.Asked).
func (d *device) sendHeld(now time.Time) {
	r := d.resend
	if r == nil || r.nh == 0 || !d.nc.IsConnected() {
		return
	}
	n, sent := 0, uint64(0)
	for _, h := range r.held[:r.nh] {
		if !d.core.Wants(h.first, h.count) {
			continue
		}
		if err := d.publishResend(h.first, h.count); err != nil {
			r.held[n] = h // down again: kept for the next reconnect
			n++
			continue
		}
		sent++
	}
	r.nh = n
	if sent > 0 {
		r.reconnects = d.nc.Stats().Reconnects // asked on the new connection: no need to ask again (tailAfterReconnect)
		d.core.Asked(now)
		d.s.limiter.info(&d.s.log, d.name+"/resend_held", sent, "resend requests held while the connection was down sent", devField(d.name))
	}
}

// tailAfterReconnect lets the core ask a silent stream's tail again at
// once after the connection came back (daemon.Core.Reconnected): a
// request without an answer went, most likely, into the dead connection.
func (d *device) tailAfterReconnect() {
	r := d.resend
	if r == nil {
		return
	}
	if n := d.nc.Stats().Reconnects; n != r.reconnects {
		r.reconnects = n
		d.core.Reconnected()
	}
}

// asked dates the core's wait from now when the message just processed
// sent its requests (daemon.Core.Asked).
func (d *device) asked(now time.Time) {
	if r := d.resend; r != nil && r.sent {
		r.sent = false
		d.core.Asked(now)
	}
}

// isAnswer reports whether subject is one of the device's resend reply
// subjects.
func (r *resender) isAnswer(subject string) bool {
	return r != nil && strings.HasPrefix(subject, r.prefix)
}

// request returns the request a reply subject answers: one of the
// device's (its prefix, then "<first>.<count>"), read by
// stream.ResendAnswerRange.
func (r *resender) request(subject string) (first int64, count int, ok bool) {
	if rest, found := strings.CutPrefix(subject, r.prefix); !found || strings.Count(rest, ".") != 1 {
		return 0, 0, false
	}
	return stream.ResendAnswerRange(subject)
}

// noResponders reports whether m is the server's answer that no device
// serves resend requests (or none is reachable): it ends a gap's wait at
// once; a tail is asked again (daemon.Core.Resent).
func noResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}

// enqueueAnswer queues a resend answer (reader goroutine) after the
// checks of a frames message: the device's authenticator (unless it is
// the server's no-responders answer, which carries none), the size, and
// a budget of its own.
func (d *device) enqueueAnswer(it item) {
	m := it.m
	if !noResponders(m) {
		if reason := d.authentic(m); reason != "" {
			d.reject(reason, 1, "resend answer refused: "+reason+" (a publisher without the device's key?)")
			return
		}
	}
	if len(m.Data) > stream.FramesHeaderLen+stream.MaxResendFrames*stream.FrameLen {
		d.reject(stream.ReasonOversized, 1, fmt.Sprintf("resend answer of %d bytes rejected before queueing", len(m.Data)))
		return
	}
	it.resend = true
	select {
	case d.resend.answers <- it:
	default:
		d.reject("overflow", 1, "resend answers queue full: answer dropped (the gap is filled)")
	}
}

// answers returns the channel of queued resend answers (nil, which never
// delivers, without resend).
func (d *device) answers() chan item {
	if d.resend == nil {
		return nil
	}
	return d.resend.answers
}

// handleAnswer gives a resend answer, arrived at at, to the core
// (processor goroutine): decoded strictly like frames; an empty payload
// answers "none kept", the server's no-responders "no device reached".
func (d *device) handleAnswer(m *nats.Msg, at time.Time) {
	first, count, ok := d.resend.request(m.Subject)
	if !ok {
		d.reject("unknown_subject", 1, "resend answer on unexpected subject "+m.Subject)
		return
	}
	var f *stream.Frames // nil: no device answered
	switch {
	case len(m.Data) > 0:
		if err := stream.DecodeFrames(m.Data, &d.frames); err != nil {
			d.reject(stream.Reason(err), 1, "resend answer rejected: "+err.Error())
			return
		}
		f = &d.frames
	case !noResponders(m):
		d.frames.Frames = d.frames.Frames[:0] // the device keeps none of them
		f = &d.frames
	}
	if d.sb != nil && f != nil && len(f.Frames) > 0 && d.core.Tailing(first, count) {
		d.sb.Recovered(at, f.FirstSeq, f.LastSeq())
	}
	d.core.Resent(first, count, f, at)
	d.asked(time.Now()) // a gap inside the frames held may have been asked for
	d.afterFrames()
}

// syncResend turns the core's resend counters into metrics.
func (d *device) syncResend() {
	r := d.resend
	if r == nil {
		return
	}
	st := d.core.ResendStats()
	p := &r.prev
	for i, v := range [...][2]uint64{{st.Answered, p.Answered}, {st.Partial, p.Partial}, {st.None, p.None}, {st.Timeout, p.Timeout}, {st.Tail, p.Tail}} {
		if v[0] > v[1] {
			r.outcomes[i].Add(float64(v[0] - v[1]))
		}
	}
	if n := st.Recovered - p.Recovered; n > 0 {
		r.recovered.Add(float64(n))
		d.s.limiter.info(&d.s.log, d.name+"/resend", n, "frames the device resent processed (a gap's, or a silent stream's tail)", devField(d.name))
	}
	if n := st.None + st.Timeout + st.Partial - p.None - p.Timeout - p.Partial; n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/resend_missing", n, "the device did not resend every frame of a gap in time: the rest goes as without resend (filled by holding up to a window, a new numbering beyond)", devField(d.name))
	}
	if n := st.Ignored - p.Ignored; n > 0 {
		r.ignored.Add(float64(n))
		d.s.limiter.warn(&d.s.log, d.name+"/resend_ignored", n, "resent frames outside a pending gap ignored (late answer?)", devField(d.name))
	}
	r.prev = st
}
