package standby

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// DigestEvery is how many frames apart a replica digests its state: after
// the frames message that crosses a multiple of it (about 4 s of a
// real-time stream). The holder publishes its digest; the others compare.
const DigestEvery = 4096

// DigestSubject carries the holder's state digests of a device.
func DigestSubject(group, device string) string {
	return "rgcpred.standby." + group + "." + device + ".digest"
}

// digestMsg is a holder's state digest at a point of the stream.
type digestMsg struct {
	Epoch       uint32 `json:"epoch"`
	Last        int64  `json:"last"`
	Digest      []byte `json:"digest"`
	Incarnation string `json:"incarnation"`
	Sig         []byte `json:"sig,omitempty"`
}

// signed returns the bytes a digest's signature covers.
func (d digestMsg) signed() ([]byte, error) {
	d.Sig = nil
	return json.Marshal(d)
}

// AfterFrames digests the state after a frames message that left the
// core at frame last of epoch, when it crossed a multiple of DigestEvery
// (processor goroutine): the holder publishes the digest, a standby
// compares it with the holder's.
func (r *Replica) AfterFrames(epoch uint32, last int64) {
	block := last / DigestEvery
	if last < 0 || (epoch == r.digestEpoch && block == r.digestBlock) {
		return
	}
	r.digestEpoch, r.digestBlock = epoch, block
	if !r.synced.Load() {
		return
	}
	sum := r.dev.Snapshot().Digest()
	g := r.group
	if g.lease.Held() {
		m := digestMsg{Epoch: epoch, Last: last, Digest: sum[:], Incarnation: g.lease.Incarnation()}
		if err := r.publishDigest(m); err != nil {
			g.cfg.Warn(r.name+"/digest", err)
		}
		return
	}
	r.compare(mark{epoch: epoch, bin: last, digest: true}, sum[:], false)
}

// publishDigest sends the holder's digest, signed with the group's
// authenticator.
func (r *Replica) publishDigest(m digestMsg) error {
	g := r.group
	if g.cfg.Auth != nil {
		b, err := m.signed()
		if err == nil {
			m.Sig, err = g.cfg.Auth.Sign(b)
		}
		if err != nil {
			return fmt.Errorf("standby: sign a digest: %w", err)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("standby: encode a digest: %w", err)
	}
	if err := g.nc.Publish(r.digestSubj, b); err != nil {
		return fmt.Errorf("standby: publish a digest: %w", err)
	}
	return nil
}

// holderDigest handles a digest received on the device's digest subject
// (NATS goroutine): one from the lease holder's incarnation (signed, with
// an authenticator) is compared with this replica's own.
func (r *Replica) holderDigest(nm *nats.Msg) {
	g := r.group
	if g.lease.Held() || !r.synced.Load() {
		return
	}
	var m digestMsg
	if err := json.Unmarshal(nm.Data, &m); err != nil {
		g.cfg.Warn(r.name+"/digest", fmt.Errorf("standby: a digest on %s: %w", nm.Subject, err))
		return
	}
	if st := g.lease.Status(); m.Incarnation == "" || m.Incarnation != st.HolderIncarnation {
		// Read the holder anew, at most once per SyncEvery: a digest of
		// another incarnation (a successor, or a forger) costs no more.
		now := time.Now().UnixNano()
		if last := r.holderRead.Load(); now-last < int64(g.cfg.SyncEvery) || !r.holderRead.CompareAndSwap(last, now) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), g.cfg.SyncEvery)
		e, _, err := g.lease.Holder(ctx)
		cancel()
		if err != nil || e.Incarnation != m.Incarnation {
			return // not the holder's: nothing to compare with
		}
	}
	if g.cfg.Auth != nil {
		b, err := m.signed()
		if err == nil {
			err = g.cfg.Auth.Verify(b, m.Sig)
		}
		if err != nil {
			g.cfg.Warn(r.name+"/digest", fmt.Errorf("standby: a digest's signature: %w", err))
			return
		}
	}
	r.compare(mark{epoch: m.Epoch, bin: m.Last, digest: true}, m.Digest, true)
}

// compare records a value at k (the holder's, or this replica's own) and,
// if the other side's is there and differs, raises the divergence alarm
// and catches up again. It reports whether the other side's was there.
func (r *Replica) compare(k mark, v []byte, holder bool) bool {
	compared, equal := r.ledger.record(k, v, holder)
	if compared {
		r.checked.Add(1)
	}
	if !compared || equal {
		return compared
	}
	what := "state digest"
	if !k.digest {
		what = "stream event"
	}
	r.group.alarm(AlarmDivergence, r.name, fmt.Errorf("standby: %s of epoch %d at frame %d differs from the holder's: catching up again", what, k.epoch, k.bin))
	r.Diverged()
	return true
}
