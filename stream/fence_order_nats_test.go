package stream

import (
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/embednats"
)

// TestSubscribeDecisionsCellOrder: over a server that restarts, a
// device's decision subscription reconnects, asks a group that answers
// nothing, and after its hold ran out takes live decisions; a copy of a
// missed window that then arrives is handed on only for the cell with no
// later window taken (the sequence of nemesis seed 35).
func TestSubscribeDecisionsCellOrder(t *testing.T) {
	s, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Addr().(*net.TCPAddr).Port
	dev, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	group, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(group.Close)
	pub, err := NewPublisher(dev, "devO")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[int32][]int64{}
	sub, err := pub.SubscribeDecisions(func(d *Decisions, err error) {
		if err != nil {
			t.Errorf("decode: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, x := range d.Decisions {
			got[x.Cell] = append(got[x.Cell], x.End)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	// A round trip makes the server hold the subscriptions before the
	// group publishes on its own connection.
	if err := dev.Flush(); err != nil {
		t.Fatal(err)
	}
	send := func(bin int64, rev uint64, copy bool, cells ...int32) {
		t.Helper()
		d := &Decisions{}
		for _, c := range cells {
			d.Decisions = append(d.Decisions, Decision{Cell: c, Kind: KindSilence, Epoch: 1, End: bin, Bin: bin + 80})
		}
		b, err := AppendDecisions(nil, d)
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: SpikesSubject("devO"), Data: b, Header: nats.Header{
			PosHeader: {Pos{Epoch: 1, Bin: bin}.String()}, GroupHeader: {"nemesis.0.1"}, LeaseHeader: {strconv.FormatUint(rev, 10)}}}
		if copy {
			m.Header.Set(CopyHeader, "1")
		}
		if err := group.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if err := group.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, e := range got {
			n += len(e)
		}
		return n
	}
	send(738800, 5, false, 21, 35, 40)
	waitFor("the first decisions", func() bool { return count() == 3 })

	// A full outage: the server restarts on the same port.
	s.Shutdown()
	s.WaitForShutdown()
	if s, err = embednats.Start("127.0.0.1", p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	waitFor("both reconnected", func() bool { return dev.IsConnected() && group.IsConnected() && pub.reconnects() > 0 })
	if err := dev.Flush(); err != nil {
		t.Fatal(err)
	}
	// No holder answers the resend requests; the hold runs out.
	time.Sleep(ResendHold + 200*time.Millisecond)
	send(747858, 9, false, 35)
	send(747884, 9, false, 21)
	waitFor("the live decisions", func() bool { return count() == 5 })
	send(739138, 5, true, 21, 35, 40) // a copy of the missed window, after later ones of 21 and 35
	send(747900, 9, false, 21, 40)
	waitFor("the last decisions", func() bool { return count() >= 8 })

	mu.Lock()
	defer mu.Unlock()
	want := map[int32][]int64{21: {738800, 747884, 747900}, 35: {738800, 747858}, 40: {738800, 739138, 747900}}
	for c, w := range want {
		if !slices.Equal(got[c], w) {
			t.Errorf("cell %d took windows %v, want %v", c, got[c], w)
		}
	}
	if f := pub.FenceStats(); f.Late != 2 || f.Resent != 1 {
		t.Errorf("fence %+v, want 2 late and 1 copy taken", f)
	}
}
