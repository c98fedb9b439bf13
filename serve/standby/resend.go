package standby

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/stream"
)

// ResendKeep is how many of the group's last decisions messages per device
// an instance keeps to publish again for a device that missed them (about
// 4 s at one message per frame; docs/protocol.md, "Decisions resend").
const ResendKeep = 4096

// ResendRate and ResendBurst bound what a holder publishes again per
// device: ResendBurst messages at once, ResendRate per second on average.
// A flood of requests (forged without message keys, or replayed) costs
// the group at most about one extra message per frame.
const (
	ResendRate  = 1024
	ResendBurst = 2 * ResendKeep
)

// Reasons a holder refuses a decisions resend request (metric labels and
// stream.ResendRefusedHeader values).
const (
	ResendMalformed = "malformed"
	ResendLimited   = "limited"
)

// ResendRefusals lists every refusal reason, for metrics initialised at 0.
var ResendRefusals = []string{stream.ReasonAuthMissing, stream.ReasonAuthInvalid, stream.ReasonReplayed, ResendMalformed, ResendLimited}

// ResendStats counts the decisions resend requests a replica's holder
// answered. Every field only grows.
type ResendStats struct {
	// Answered counts requests answered; Resent the messages published
	// again for them.
	Answered, Resent uint64
	// Gaps counts answers that could not reach back to the requested
	// position: the messages right after it were no longer kept.
	Gaps uint64
	// Refused counts requests refused, by reason (ResendRefusals).
	Refused map[string]uint64
}

// sentRing keeps the last decisions messages of the group seen on a
// device's spikes subject (the holder's own come back from the server),
// with their original headers. It stores the received *nats.Msg itself
// (the client allocated it anyway): no copy, no allocation per message.
// Safe for concurrent use.
type sentRing struct {
	mu      sync.Mutex
	msgs    []*nats.Msg
	pos     []stream.Pos
	head, n int
	// floor is the newest position overwritten; a request from before it
	// cannot be answered in full.
	floor    stream.Pos
	hasFloor bool
}

func newSentRing(capacity int) *sentRing {
	return &sentRing{msgs: make([]*nats.Msg, capacity), pos: make([]stream.Pos, capacity)}
}

// add keeps m, at position p, if p is after every kept position: a copy
// published again is older and is not kept twice.
func (s *sentRing) add(m *nats.Msg, p stream.Pos) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := len(s.msgs)
	if s.n > 0 && !s.pos[(s.head+s.n-1)%c].Less(p) {
		return
	}
	if s.n == c {
		s.floor, s.hasFloor = s.pos[s.head], true
		s.msgs[s.head] = nil
		s.head = (s.head + 1) % c
		s.n--
	}
	i := (s.head + s.n) % c
	s.msgs[i], s.pos[i] = m, p
	s.n++
}

// reached reports whether a message at or after p is kept.
func (s *sentRing) reached(p stream.Pos) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n > 0 && !s.pos[(s.head+s.n-1)%len(s.msgs)].Less(p)
}

// after appends to dst the kept messages after p, oldest first; gap
// reports that messages after p are no longer kept.
func (s *sentRing) after(dst []*nats.Msg, p stream.Pos) (out []*nats.Msg, gap bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := len(s.msgs)
	lo, hi := 0, s.n // the first kept position after p: positions are kept in order
	for lo < hi {
		mid := (lo + hi) / 2
		if p.Less(s.pos[(s.head+mid)%c]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for i := lo; i < s.n; i++ {
		dst = append(dst, s.msgs[(s.head+i)%c])
	}
	return dst, s.hasFloor && p.Less(s.floor)
}

// resender answers a device's decisions resend requests while this
// instance holds the lease: it checks a request (the device's Up key, a
// sending time later than the last one's, a position), spends the rate
// budget, publishes again the kept messages after the position, then
// answers with their count. Its handler runs on one NATS delivery
// goroutine.
type resender struct {
	nc    *nats.Conn
	gate  *Gate
	scope string
	up    *stream.Auth
	sent  *sentRing

	lastTime int64
	tokens   float64
	at       time.Time
	out      []*nats.Msg
	// againBuf holds the messages published again after a gap in the
	// device's frames (Replica.Arrived, processor goroutine).
	againBuf []*nats.Msg

	mu    sync.Mutex
	stats ResendStats
}

func newResender(nc *nats.Conn, gate *Gate, scope string, up *stream.Auth) *resender {
	return &resender{nc: nc, gate: gate, scope: scope, up: up, sent: newSentRing(ResendKeep), tokens: ResendBurst,
		stats: ResendStats{Refused: map[string]uint64{}}}
}

// observed keeps a decisions message of the group seen at p, if its
// position is plausible (Gate.Plausible: not a forged one far ahead).
func (r *resender) observed(m *nats.Msg, p stream.Pos) {
	if r.gate.Plausible(p) {
		r.sent.add(m, p)
	}
}

// handle answers one request (NATS goroutine). A standby, or an instance
// of another shard, leaves it to the holder of the requested group.
func (r *resender) handle(m *nats.Msg) {
	if m.Header.Get(stream.GroupHeader) != r.scope || !r.gate.Active() {
		return
	}
	p, reason := r.check(m)
	var gap bool
	if reason == "" {
		r.awaitEcho()
		r.out, gap = r.sent.after(r.out[:0], p)
		reason = r.spend(len(r.out), time.Now())
	}
	if reason != "" {
		r.count(func(s *ResendStats) { s.Refused[reason]++ })
		r.answer(m, stream.ResendRefusedHeader, reason)
		return
	}
	to := ""
	if len(r.out) > 0 {
		to = r.out[len(r.out)-1].Header.Get(stream.PosHeader)
	}
	n := 0
	for i, c := range r.out {
		if publishCopy(r.nc, c) == nil {
			n++
		}
		r.out[i] = nil
	}
	r.count(func(s *ResendStats) {
		s.Answered++
		s.Resent += uint64(n)
		if gap {
			s.Gaps++
		}
	})
	a := &nats.Msg{Subject: m.Reply, Header: nats.Header{stream.ResentHeader: {strconv.Itoa(n)}}}
	if to != "" {
		a.Header.Set(stream.ResentToHeader, to)
	}
	if gap {
		a.Header.Set(stream.ResendGapHeader, "1")
	}
	if m.Reply != "" {
		_ = r.nc.PublishMsg(a)
	}
}

// EchoWait bounds how long the holder waits, before it answers a resend
// request, for its last published message to come back from the server
// into the kept ones.
const EchoWait = 100 * time.Millisecond

// awaitEcho waits until the kept messages reach the last position this
// instance published, at most EchoWait: the server sent a message the
// device missed back to this instance before it forwarded the request,
// but another goroutine keeps it. A message that never comes back (lost
// with a server) costs the wait.
func (r *resender) awaitEcho() {
	last, ok := r.gate.Observed()
	for deadline := time.Now().Add(EchoWait); ok && !r.sent.reached(last) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// check returns a request's position, or the reason it is refused.
func (r *resender) check(m *nats.Msg) (stream.Pos, string) {
	if r.up != nil {
		if err := r.up.Check(m); err != nil {
			if errors.Is(err, stream.ErrAuthMissing) {
				return stream.Pos{}, stream.ReasonAuthMissing
			}
			return stream.Pos{}, stream.ReasonAuthInvalid
		}
		t, ok := stream.SentAt(m)
		if !ok || t <= r.lastTime {
			return stream.Pos{}, stream.ReasonReplayed
		}
		r.lastTime = t
	}
	p, err := stream.ParsePos(m.Header.Get(stream.PosHeader))
	if err != nil {
		return stream.Pos{}, ResendMalformed
	}
	return p, ""
}

// spend takes n messages (at least one per request) from the budget, or
// returns ResendLimited.
func (r *resender) spend(n int, now time.Time) string {
	if !r.at.IsZero() {
		r.tokens = min(ResendBurst, r.tokens+now.Sub(r.at).Seconds()*ResendRate)
	}
	r.at = now
	cost := float64(max(n, 1))
	if cost > r.tokens {
		return ResendLimited
	}
	r.tokens -= cost
	return ""
}

// answer replies to a request with one header.
func (r *resender) answer(m *nats.Msg, key, value string) {
	if m.Reply != "" {
		_ = r.nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{key: {value}}})
	}
}

func (r *resender) count(f func(*ResendStats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// Stats returns the counters (Refused has every reason).
func (r *resender) Stats() ResendStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Refused = make(map[string]uint64, len(ResendRefusals))
	for _, k := range ResendRefusals {
		s.Refused[k] = r.stats.Refused[k]
	}
	return s
}
