package stream

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// TypeResend is a resend request (daemon -> device, on the resend
// subject): send me frames [First, First+Count) again.
const TypeResend = 7

// ResendLen is the length of a resend request.
const ResendLen = 16

// MaxResendFrames is the most frames one resend request asks for: one
// frames message's worth, and a window, the longest gap the daemon fills.
const MaxResendFrames = MaxFramesPerMsg

// ResendRingFrames is the number of frames a Publisher serving resend
// requests keeps (ServeResend): the last 16384 bins, about 16.5 s, so a
// daemon cut off by a NATS partition or outage of that long gets its gap
// back (384 KiB of frames and 128 KiB of seqs, allocated once).
const ResendRingFrames = 16384

// resendAnswersPerSecond bounds the answers a Publisher sends: a forged
// or replayed flood of requests costs at most this many frames messages a
// second. A gap of the whole ring takes 16 requests per daemon, so three
// replicas asking at once, with a tail each, stay within it.
const resendAnswersPerSecond = 64

// ResendSubject is the subject a device's daemons ask it to resend frames
// on (request/reply; the answer is a frames message or an empty payload).
func ResendSubject(device string) string { return "rgc." + device + ".resend" }

// Resend asks a device for its frames First .. First+Count-1 again.
type Resend struct {
	// First is the first frame's seq (0 .. MaxSeq).
	First int64
	// Count is the number of frames, 1 .. MaxResendFrames.
	Count int
}

func checkResend(r *Resend) error {
	if r.Count < 1 || r.Count > MaxResendFrames {
		return derr(ReasonRange, "resend of %d frames, want 1 to %d", r.Count, MaxResendFrames)
	}
	return checkSeqs(r.First, r.Count)
}

// AppendResend appends the encoding of r to dst.
func AppendResend(dst []byte, r *Resend) ([]byte, error) {
	if err := checkResend(r); err != nil {
		return dst, err
	}
	dst = putHeader(dst, TypeResend, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(r.Count))
	return binary.LittleEndian.AppendUint64(dst, uint64(r.First)), nil
}

// DecodeResend decodes a resend request into r.
func DecodeResend(b []byte, r *Resend) error {
	if _, err := checkHeader(b, TypeResend, ResendLen, 1, 0); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if n > MaxResendFrames {
		return derr(ReasonRange, "resend of %d frames, want 1 to %d", n, MaxResendFrames)
	}
	r.Count, r.First = int(n), getI64(b[8:])
	return checkResend(r)
}

// frameRing keeps the last ResendRingFrames frames a Publisher sent, by
// seq. Its storage is allocated once (ServeResend).
type frameRing struct {
	seqs   []int64 // seq of the frame in each slot, -1 none
	frames []Frame
}

func newFrameRing() *frameRing {
	r := &frameRing{seqs: make([]int64, ResendRingFrames), frames: make([]Frame, ResendRingFrames)}
	for i := range r.seqs {
		r.seqs[i] = -1
	}
	return r
}

// keep stores f's frames. It allocates nothing.
func (r *frameRing) keep(f *Frames) {
	for i := range f.Frames {
		s := f.FirstSeq + int64(i)
		k := s % ResendRingFrames
		r.seqs[k], r.frames[k] = s, f.Frames[i]
	}
}

// get sets out to the longest run of frames of [q.First, q.First+q.Count)
// the ring holds, starting at the first one it holds; out.Frames is empty
// when it holds none.
func (r *frameRing) get(q *Resend, out *Frames) {
	out.Frames = out.Frames[:0]
	end := q.First + int64(q.Count)
	for s := q.First; s < end; s++ {
		k := s % ResendRingFrames
		if r.seqs[k] != s {
			if len(out.Frames) > 0 {
				return // a run ends: the device's numbering changed within it
			}
			continue
		}
		if len(out.Frames) == 0 {
			out.FirstSeq = s
		}
		out.Frames = append(out.Frames, r.frames[k])
	}
}

// resendServer is a Publisher's side of resend requests.
type resendServer struct {
	ring    *frameRing
	sub     *nats.Subscription
	out     Frames
	buf     []byte
	answers int       // answers sent in the current second
	second  time.Time // start of the current second
	stats   ResendServed
}

// ResendServed counts a Publisher's resend requests. Every field only
// grows.
type ResendServed struct {
	// Answered counts requests answered with at least one frame; Frames
	// the frames sent in them.
	Answered, Frames uint64
	// None counts requests answered with an empty payload (no requested
	// frame kept).
	None uint64
	// Refused counts requests dropped: not authentic (UseKeys), not a
	// valid resend request, without a reply subject, or over the rate
	// limit (64 answers a second).
	Refused uint64
}

// ServeResend makes p keep the frames it publishes from now on (the last
// ResendRingFrames, in storage allocated here once) and answer its
// daemons' resend requests (docs/protocol.md, "Resend"): a frames message
// with the requested frames it keeps, or an empty payload when it keeps
// none, on the request's reply subject. With UseKeys, a request must be
// authentic under the Down key and the answer is signed with the Up key.
// Call it after UseKeys; calling it again does nothing. The requests are
// answered on the NATS client's delivery goroutine.
func (p *Publisher) ServeResend() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resend != nil {
		return nil
	}
	rs := &resendServer{ring: newFrameRing(), out: Frames{Frames: make([]Frame, 0, MaxResendFrames)},
		buf: make([]byte, 0, FramesHeaderLen+MaxResendFrames*FrameLen)}
	sub, err := p.nc.Subscribe(ResendSubject(p.device), p.answerResend)
	if err != nil {
		return fmt.Errorf("stream: serve resend of %s: %w", p.device, err)
	}
	rs.sub = sub
	p.resend = rs
	return nil
}

// ResendServed returns the counters of resend requests (zero without
// ServeResend).
func (p *Publisher) ResendServed() ResendServed {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resend == nil {
		return ResendServed{}
	}
	return p.resend.stats
}

// keepFrames stores published frames for resend requests; the caller
// holds p.mu.
func (p *Publisher) keepFrames(f *Frames) {
	if p.resend != nil {
		p.resend.ring.keep(f)
	}
}

// answerResend answers one resend request.
func (p *Publisher) answerResend(m *nats.Msg) {
	var q Resend
	ok := m.Reply != "" && p.authentic(m) && DecodeResend(m.Data, &q) == nil
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.resend
	if now := time.Now(); now.Sub(rs.second) >= time.Second {
		rs.second, rs.answers = now, 0
	}
	if !ok || rs.answers >= resendAnswersPerSecond {
		rs.stats.Refused++
		return
	}
	rs.answers++
	rs.ring.get(&q, &rs.out)
	b := rs.buf[:0]
	if len(rs.out.Frames) > 0 {
		var err error
		if b, err = AppendFrames(b, &rs.out); err != nil {
			rs.stats.Refused++ // a kept frame the encoder refuses was never published
			return
		}
		rs.buf = b
	}
	if err := p.send(m.Reply, b); err != nil {
		return // the daemon's request times out and it fills the gap
	}
	if len(rs.out.Frames) == 0 {
		rs.stats.None++
		return
	}
	rs.stats.Answered++
	rs.stats.Frames += uint64(len(rs.out.Frames))
}

// ResendReply returns the reply subject of a request for the frames
// [first, first+count): prefix (ending in ".") then "<first>.<count>"
// (docs/protocol.md "Resend"; ResendAnswerRange reads it back).
func ResendReply(prefix string, first int64, count int) string {
	return prefix + strconv.FormatInt(first, 10) + "." + strconv.Itoa(count)
}

// ResendAnswerRange returns the frames a resend answer on subject may
// carry: a request's reply subject ends in ".<first>.<n>" (docs/protocol.md
// "Resend", ResendReply), and a daemon takes the frames of [first,
// first+n) only.
func ResendAnswerRange(subject string) (first int64, count int, ok bool) {
	rest, c, found := cutLast(subject)
	if !found {
		return 0, 0, false
	}
	_, f, found := cutLast(rest)
	if !found {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(f, 10, 64)
	count, err2 := strconv.Atoi(c)
	if err1 != nil || err2 != nil || count < 1 || count > MaxResendFrames || checkSeqs(first, count) != nil {
		return 0, 0, false
	}
	return first, count, true
}

// cutLast splits s at its last ".".
func cutLast(s string) (before, after string, found bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}
