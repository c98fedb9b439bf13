package service

import (
	"errors"

	"github.com/nats-io/nats.go"

	"rgcpred/rgc"
	"rgcpred/stream"
)

// A reload reaches each replica at a frame of its own: replicas would
// serve different models from different frames, and a recording could not
// be audited across them. So a standby group refuses it: a new model means
// restarting the group.
var errStandbyReload = errors.New("reload refused in a hot-standby group: replicas must serve the same model from the same frame; " +
	"restart the group's instances with the new checkpoint (docs/operations.md, \"Hot standby\")")

// groupResetLead is how many frames past the holder's receive edge a reset
// requested by an operator applies: a window, about a second of a
// real-time stream, so that the announcement reaches every replica and the
// recording before that frame does (even behind a frames message of
// stream.MaxFramesPerMsg frames in flight).
const groupResetLead = rgc.WindowBins

// announce publishes a group event on the device's control subject,
// signed with the group's key when keys are configured
// (stream.SignAnnouncement: replicas admit it under that key, not the
// device's).
func (d *device) announce(payload []byte) error {
	if d.s.groupAuth == nil {
		return d.nc.Publish(d.ctlSubj, payload)
	}
	m := &nats.Msg{Subject: d.ctlSubj, Data: payload, Header: nats.Header{stream.GroupHeader: {d.s.group.Config().Scope}}}
	d.announceMu.Lock()
	stream.SignAnnouncement(d.s.groupAuth, m, &d.announced)
	d.announceMu.Unlock()
	return d.nc.PublishMsg(m)
}

// groupReset makes an operator's reset a group event: the holder announces
// on the device's control subject a reset at a frame past its receive
// edge (stream.OpResetAt), which every replica and the recording receive
// and apply before that frame; a standby announces nothing and waits for
// the holder's. It returns the frame announced (-1 on a standby), or an
// error code and message for the request.
func (d *device) groupReset() (at int64, code, msg string) {
	epoch, first := d.epoch.Load(), d.first.Load()
	if first < 0 {
		return -1, codeBadRequest, "no stream runs for " + d.name + ": nothing to reset (the next frame starts a new stream)"
	}
	if !d.s.group.Lease().Held() {
		return -1, "", ""
	}
	at = min(max(d.last.Load(), first)+max(d.queuedFrames.Load(), 0)+groupResetLead, stream.MaxSeq)
	payload, err := stream.AppendControl(nil, &stream.Control{Op: stream.OpResetAt, Epoch: epoch, At: at})
	if err == nil {
		err = d.announce(payload)
	}
	if err != nil {
		return -1, codeUnavailable, "announce the reset on " + d.ctlSubj + ": " + err.Error()
	}
	d.s.log.Info().Str("device", d.name).Uint32("epoch", epoch).Int64("at", at).
		Msg("reset requested over NATS: announced to the group on the control subject")
	return at, "", ""
}
