package standby

import (
	"encoding/json"
	"sync/atomic"
	"time"
)

// Alarm reasons: what an instance found that the protocol must not allow.
const (
	// AlarmDivergence: this replica's state or stream event differs from
	// the holder's at the same point of the stream (it catches up again).
	AlarmDivergence = "divergence"
	// AlarmState: a state answer that claims the lease but does not come
	// from its holder (incarnation, revision or signature), or a peers
	// answer that fails its checks (PeersSubject), refused.
	AlarmState = "state_refused"
	// AlarmLease: a lease entry written by no instance, refused.
	AlarmLease = "lease_foreign"
)

// AlarmReasons lists every alarm reason, for counters initialised at 0.
var AlarmReasons = []string{AlarmDivergence, AlarmState, AlarmLease}

// AlarmSubject is where a group's instances publish their alarms (JSON
// AlarmEvent), for operators and the flight recorder.
func AlarmSubject(group string) string { return "rgcpred.standby." + group + ".alarms" }

// AlarmEvent is an alarm as published on AlarmSubject.
type AlarmEvent struct {
	Group  string    `json:"group"`
	ID     string    `json:"id"`
	Device string    `json:"device,omitempty"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// alarms counts a group's alarms by reason.
type alarms [3]atomic.Uint64

// Alarms returns the alarms raised by this instance, by reason.
func (g *Group) Alarms() map[string]uint64 {
	m := make(map[string]uint64, len(AlarmReasons))
	for i, r := range AlarmReasons {
		m[r] = g.alarms[i].Load()
	}
	return m
}

// alarm counts, logs and publishes an alarm.
func (g *Group) alarm(reason, device string, err error) {
	for i, r := range AlarmReasons {
		if r == reason {
			g.alarms[i].Add(1)
		}
	}
	g.cfg.Log.Error().Str("group", g.cfg.Group).Str("device", device).Str("reason", reason).Err(err).Msg("standby: alarm")
	b, jerr := json.Marshal(AlarmEvent{Group: g.cfg.Group, ID: g.cfg.ID, Device: device, Reason: reason, Detail: err.Error(), At: time.Now().UTC()})
	if jerr == nil {
		_ = g.nc.Publish(AlarmSubject(g.cfg.Group), b) // best effort: the counter and the log hold it too
	}
}
