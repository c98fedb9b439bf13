package recorder

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/stream"
)

// LogKeep is how many of a device's messages a fill log keeps: about 30 s
// of frames and decisions at 992 frames a second. It bounds how far back
// a hole in the recording can be filled (Filler): what left the log
// before it was checked is counted as lost (FillStats.Lost).
const LogKeep = 1 << 16

// Log keeps the last messages an instance received on a device's
// recorded subjects (frames and control messages as it handles them, the
// group's decisions and events as they come back from the server, frames
// recovered by a resend request), with when it received them, so that a
// Filler can store again what the recording lacks. It keeps the received
// *nats.Msg itself (the client allocated it anyway), in storage allocated
// once: adding allocates nothing. Safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	ents []entry
	n    uint64 // entries added; entry i is at ents[i%len(ents)]
	live int64  // last frame of the last live frames message, -1 none
}

// entry is one logged message. Its place among the recording's messages
// is given by order: a frames message after the frames before its first,
// any other after the last live frame received before it.
type entry struct {
	m       *nats.Msg
	subject string // the recorded subject (a resend answer's is the device's frames subject)
	at      int64  // when received, Unix ns
	order   fillOrder
}

// fillOrder places a filled message among the recording's: frame is a
// frames message's first frame (rank 0), or for any other message the last
// frame received before it (rank 1); n is the message's number in its log.
type fillOrder struct {
	frame int64
	rank  uint8
	n     uint64
}

func (o fillOrder) less(p fillOrder) bool {
	if o.frame != p.frame {
		return o.frame < p.frame
	}
	if o.rank != p.rank {
		return o.rank < p.rank
	}
	return o.n < p.n
}

// NewLog returns a log keeping the last capacity messages (LogKeep when
// capacity <= 0).
func NewLog(capacity int) *Log {
	if capacity <= 0 {
		capacity = LogKeep
	}
	return &Log{ents: make([]entry, capacity), live: -1}
}

// Add logs a message received live on subject (a recorded subject of the
// device: Subjects). A nil log does nothing.
func (l *Log) Add(m *nats.Msg, subject string) { l.add(m, subject, true) }

// AddResent logs a frames message the device sent again for a gap (a
// resend answer): it is recorded on the device's frames subject, and
// placed by its own frames, not where it arrived. A nil log does nothing.
func (l *Log) AddResent(m *nats.Msg, subject string) { l.add(m, subject, false) }

func (l *Log) add(m *nats.Msg, subject string, live bool) {
	if l == nil {
		return
	}
	at := time.Now().UnixNano()
	first, n, ferr := int64(0), 0, error(nil)
	frames := subject != "" && isFrames(subject)
	if frames {
		first, n, ferr = stream.PeekFrames(m.Data)
	}
	l.mu.Lock()
	o := fillOrder{frame: l.live, rank: 1, n: l.n}
	if frames && ferr == nil {
		o.frame, o.rank = first, 0
		if live {
			l.live = first + int64(n) - 1
		}
	}
	l.ents[l.n%uint64(len(l.ents))] = entry{m: m, subject: subject, at: at, order: o}
	l.n++
	l.mu.Unlock()
}

// isFrames reports whether subject is a device's frames subject
// (rgc.DEVICE.stim).
func isFrames(subject string) bool {
	const suffix = ".stim"
	return len(subject) > len(suffix) && subject[len(subject)-len(suffix):] == suffix
}

// since appends to dst the entries from number from on received before
// before (Unix ns), and returns the number after the last appended and how
// many entries from from on had already left the log.
func (l *Log) since(dst []entry, from uint64, before int64) (out []entry, next, lost uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := uint64(len(l.ents)); l.n > c && from < l.n-c {
		lost, from = l.n-c-from, l.n-c
	}
	for ; from < l.n; from++ {
		e := l.ents[from%uint64(len(l.ents))]
		if e.at >= before {
			break
		}
		dst = append(dst, e)
	}
	return dst, from, lost
}

// oldest returns the number of the oldest entry kept and its time (0 when
// the log is empty).
func (l *Log) oldest() (uint64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := uint64(0)
	if c := uint64(len(l.ents)); l.n > c {
		from = l.n - c
	}
	if from == l.n {
		return from, 0
	}
	return from, l.ents[from%uint64(len(l.ents))].at
}

// identitySeed keys identity within a process.
var identitySeed = maphash.MakeSeed()

// identity identifies a message by its subject and payload: a filler and
// a reader find the recorded copy of a message by it.
func identity(subject string, data []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(identitySeed)
	h.WriteString(subject)
	h.WriteByte(0)
	h.Write(data)
	return h.Sum64()
}
