package standby

import (
	"bytes"
	"sync"
)

// mark names a point of a device's stream at which replicas compare what
// they hold: a stream event (bin stream.EventBin) or the state after the
// frames message that crossed a multiple of DigestEvery frames.
type mark struct {
	epoch  uint32
	bin    int64
	digest bool
}

// ledgerLen bounds the marks a ledger keeps on each side: the oldest go
// first (a replica that never sees the other side's mark forgets it).
const ledgerLen = 32

type ledgerEntry struct {
	k mark
	v []byte
}

// ledger pairs this replica's values at marks with the holder's: the
// first of the two to arrive waits for the other, and a pair that differs
// is a divergence. Safe for concurrent use.
type ledger struct {
	mu          sync.Mutex
	own, holder []ledgerEntry
}

// record stores v, this replica's (holder false) or the holder's value at
// k, and compares it with the other side's if that arrived first.
// compared reports a comparison; equal its outcome.
func (l *ledger) record(k mark, v []byte, holder bool) (compared, equal bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mine, other := &l.own, &l.holder
	if holder {
		mine, other = other, mine
	}
	for i, e := range *other {
		if e.k == k {
			*other = append((*other)[:i], (*other)[i+1:]...)
			return true, bytes.Equal(e.v, v)
		}
	}
	for _, e := range *mine {
		if e.k == k { // a repeat (the holder's message observed twice): keep the first
			return false, false
		}
	}
	if len(*mine) == ledgerLen {
		*mine = append((*mine)[:0], (*mine)[1:]...)
	}
	*mine = append(*mine, ledgerEntry{k: k, v: bytes.Clone(v)})
	return false, false
}

// forget removes this replica's own value at k and reports whether it
// was still waiting for the holder's.
func (l *ledger) forget(k mark) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.own {
		if e.k == k {
			l.own = append(l.own[:i], l.own[i+1:]...)
			return true
		}
	}
	return false
}

// reset forgets every mark (a replica that restored the holder's state).
func (l *ledger) reset() {
	l.mu.Lock()
	l.own, l.holder = l.own[:0], l.holder[:0]
	l.mu.Unlock()
}
