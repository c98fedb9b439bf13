package stream

import (
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"testing"

	"rgcpred/rgc"
)

func sampleFrames(first int64, n int) *Frames {
	f := &Frames{FirstSeq: first, Frames: make([]Frame, n)}
	for i := range f.Frames {
		f.Frames[i].Time = 1_000_000_000 + int64(i)*1_008_264
		for c := range f.Frames[i].LED {
			f.Frames[i].LED[c] = float32(i*4+c) / float32(4*n)
		}
	}
	return f
}

func TestFramesRoundTrip(t *testing.T) {
	for _, n := range []int{1, 7, MaxFramesPerMsg} {
		in := sampleFrames(12345, n)
		b, err := AppendFrames(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != FramesHeaderLen+n*FrameLen {
			t.Fatalf("n=%d: %d bytes, want %d", n, len(b), FramesHeaderLen+n*FrameLen)
		}
		var out Frames
		if err := DecodeFrames(b, &out); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !reflect.DeepEqual(in, &out) {
			t.Fatalf("n=%d: round trip differs", n)
		}
		if out.LastSeq() != 12345+int64(n)-1 {
			t.Fatalf("LastSeq %d", out.LastSeq())
		}
	}
}

// TestFramesLayout pins the byte layout documented in docs/protocol.md.
func TestFramesLayout(t *testing.T) {
	f := &Frames{FirstSeq: 0x0102030405, Frames: []Frame{{Time: -2, LED: [4]float32{1, 0.5, 0, -0.25}}}}
	b, err := AppendFrames(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 1, 1, 0, 0, 0, 0, 0, 5, 4, 3, 2, 1, 0, 0, 0,
		0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0, 0, 0x80, 0x3f, 0, 0, 0, 0x3f, 0, 0, 0, 0, 0, 0, 0x80, 0xbe}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("layout\n got % x\nwant % x", b, want)
	}
}

func TestDecisionsRoundTrip(t *testing.T) {
	in := &Decisions{Decisions: []Decision{
		{Cell: 7, Kind: KindSpike, End: 1023, Bin: 1024, Prob: 0.75, FrameTime: 99, DecidedAt: 1e18},
		{Cell: 0, Kind: KindSilence, End: 5000, Bin: 5000 + rgc.Horizon, Prob: 0.5, FrameTime: -1, DecidedAt: 3},
		{Cell: math.MaxInt32, Kind: KindSpike, End: MaxSeq - rgc.Horizon, Bin: MaxSeq, Prob: 1, Flags: FlagFilled, Epoch: 65535},
		{Cell: 3, Kind: KindSkipped, End: 2000, Bin: 2000 + rgc.Horizon, Flags: FlagFilled | FlagModelError, Epoch: 2},
	}}
	b, err := AppendDecisions(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != DecisionsHeaderLen+4*DecisionLen {
		t.Fatalf("%d bytes", len(b))
	}
	var out Decisions
	if err := DecodeDecisions(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, &out) {
		t.Fatalf("round trip differs:\n%+v\n%+v", in, &out)
	}
}

func TestControlRoundTrip(t *testing.T) {
	var h1, h2 History
	h1.Cell, h2.Cell = 3, 1000
	h1.Spikes[0], h1.Spikes[9], h1.Spikes[rgc.WindowBins-1] = true, true, true
	for j := 0; j < rgc.WindowBins; j += 37 {
		h2.Spikes[j] = true
	}
	for _, in := range []*Control{{Op: OpHistory, Histories: []History{h1, h2}}, {Op: OpReset}, {Op: OpResetAt, Epoch: 7, At: MaxSeq}} {
		b, err := AppendControl(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		var out Control
		if err := DecodeControl(b, &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, &out) {
			t.Fatalf("op %d: round trip differs", in.Op)
		}
	}
	// A reset at a frame: the epoch at byte 8, the seq at byte 16.
	if b, _ := AppendControl(nil, &Control{Op: OpResetAt, Epoch: 0x01020304, At: 0x0a0b}); len(b) != ResetAtLen ||
		binary.LittleEndian.Uint32(b[8:]) != 0x01020304 || binary.LittleEndian.Uint64(b[16:]) != 0x0a0b || !zero(b[12:16]) {
		t.Fatalf("reset at a frame encoded as % x", b)
	}
	// Bit order: bin j in byte j/8, bit j%8.
	b, _ := AppendControl(nil, &Control{Op: OpHistory, Histories: []History{h1}})
	if b[ControlHeaderLen+4] != 1<<0 || b[ControlHeaderLen+4+1] != 1<<1 || b[len(b)-1] != 1<<7 {
		t.Fatalf("bitmap bytes % x", b[ControlHeaderLen+4:ControlHeaderLen+6])
	}
}

func TestStatusRoundTrip(t *testing.T) {
	in := &Status{LastSeq: -1, Shard: 1, Shards: 2, Cells: []int32{1, 5, 9}, Total: 6, Stagger: true, Epoch: 7, First: 1 << 40,
		Skipped: 12, Rejected: 1 << 60}
	b, err := AppendStatus(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	var out Status
	if err := DecodeStatus(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, &out) {
		t.Fatalf("round trip differs: %+v", out)
	}
	if out.Index(0) != 1 || out.Index(2) != 5 {
		t.Fatalf("whole-list indices %d, %d; want 1, 5", out.Index(0), out.Index(2))
	}
	for _, off := range []int{22, 23} {
		bad := slices.Clone(b)
		bad[off] |= 0x80
		if err := DecodeStatus(bad, &out); Reason(err) != ReasonReserved {
			t.Errorf("reserved bit in byte %d: %v", off, err)
		}
	}
	// The stimulus mode round-trips both ways; an unknown one is refused.
	for _, m := range []rgc.StimMode{rgc.StimZeroPhase, rgc.StimCausal} {
		in.StimMode = m
		b, err := AppendStatus(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeStatus(b, &out); err != nil || out.StimMode != m {
			t.Errorf("stimulus mode %v decoded as %v (%v)", m, out.StimMode, err)
		}
	}
	in.StimMode = 9
	if _, err := AppendStatus(nil, in); Reason(err) != ReasonRange {
		t.Errorf("unknown stimulus mode: %v", err)
	}
}

func TestEncodeRejects(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name   string
		err    error
		reason string
	}{
		{"no frames", second(AppendFrames(nil, &Frames{})), ReasonRange},
		{"too many frames", second(AppendFrames(nil, sampleFrames(0, MaxFramesPerMsg+1))), ReasonRange},
		{"negative seq", second(AppendFrames(nil, sampleFrames(-1, 1))), ReasonRange},
		{"seq overflow", second(AppendFrames(nil, sampleFrames(MaxSeq, 2))), ReasonRange},
		{"nan", second(AppendFrames(nil, &Frames{Frames: []Frame{{LED: [4]float32{0, nan, 0, 0}}}})), ReasonNonFinite},
		{"bad kind", second(AppendDecisions(nil, &Decisions{Decisions: []Decision{{Kind: 9, End: 1, Bin: 2}}})), ReasonRange},
		{"spike at end", second(AppendDecisions(nil, &Decisions{Decisions: []Decision{{Kind: KindSpike, End: 1, Bin: 1}}})), ReasonRange},
		{"prob > 1", second(AppendDecisions(nil, &Decisions{Decisions: []Decision{{Kind: KindSpike, End: 1, Bin: 2, Prob: 1.5}}})), ReasonRange},
		{"reset with cells", second(AppendControl(nil, &Control{Op: OpReset, Histories: make([]History, 1)})), ReasonRange},
		{"reset at a negative seq", second(AppendControl(nil, &Control{Op: OpResetAt, At: -1})), ReasonRange},
		{"reset at a frame with cells", second(AppendControl(nil, &Control{Op: OpResetAt, Histories: make([]History, 1)})), ReasonRange},
		{"empty history", second(AppendControl(nil, &Control{Op: OpHistory})), ReasonRange},
		{"bad shard", second(AppendStatus(nil, &Status{Shard: 2, Shards: 2})), ReasonRange},
	}
	for _, c := range cases {
		if got := Reason(c.err); got != c.reason {
			t.Errorf("%s: reason %q (err %v), want %q", c.name, got, c.err, c.reason)
		}
	}
}

func second(_ []byte, err error) error { return err }

func goodFrames(t testing.TB) []byte {
	b, err := AppendFrames(nil, sampleFrames(100, 3))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeFramesRejects(t *testing.T) {
	good := goodFrames(t)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name   string
		b      []byte
		reason string
	}{
		{"empty", nil, ReasonTruncated},
		{"one byte", []byte{1}, ReasonTruncated},
		{"version 2", mod(func(b []byte) []byte { b[0] = 2; return b }), ReasonVersion},
		{"version 0", mod(func(b []byte) []byte { b[0] = 0; return b }), ReasonVersion},
		{"decisions type", mod(func(b []byte) []byte { b[1] = TypeDecisions; return b }), ReasonType},
		{"short header", good[:10], ReasonTruncated},
		{"truncated body", good[:len(good)-1], ReasonTruncated},
		{"trailing byte", append(append([]byte(nil), good...), 0), ReasonLength},
		{"count zero", mod(func(b []byte) []byte { b[2] = 0; return b[:FramesHeaderLen] }), ReasonRange},
		{"count too big", mod(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[2:], MaxFramesPerMsg+1); return b }), ReasonRange},
		{"oversized", make([]byte, FramesHeaderLen+MaxFramesPerMsg*FrameLen+1), ReasonOversized},
		{"reserved", mod(func(b []byte) []byte { b[5] = 1; return b }), ReasonReserved},
		{"negative seq", mod(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], math.MaxUint64); return b }), ReasonRange},
		{"seq beyond max", mod(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], MaxSeq-1); return b }), ReasonRange},
		{"nan", mod(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[FramesHeaderLen+FrameLen+8:], math.Float32bits(float32(math.NaN())))
			return b
		}), ReasonNonFinite},
		{"inf", mod(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[len(b)-4:], math.Float32bits(float32(math.Inf(-1))))
			return b
		}), ReasonNonFinite},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f Frames
			err := DecodeFrames(c.b, &f)
			if Reason(err) != c.reason {
				t.Fatalf("err %v (reason %q), want reason %q", err, Reason(err), c.reason)
			}
		})
	}
}

func TestDecodeOthersReject(t *testing.T) {
	dec, _ := AppendDecisions(nil, &Decisions{Decisions: []Decision{{Cell: 1, Kind: KindSpike, End: 10, Bin: 11, Prob: 0.5}}})
	ctl, _ := AppendControl(nil, &Control{Op: OpHistory, Histories: make([]History, 1)})
	resetAt, _ := AppendControl(nil, &Control{Op: OpResetAt, Epoch: 1, At: 2000})
	mod := func(b []byte, f func(b []byte)) []byte { c := append([]byte(nil), b...); f(c); return c }
	cases := []struct {
		name   string
		err    error
		reason string
	}{
		{"decisions: bad kind", DecodeDecisions(mod(dec, func(b []byte) { b[8+4] = 4 }), &Decisions{}), ReasonRange},
		{"decisions: unknown flag", DecodeDecisions(mod(dec, func(b []byte) { b[8+5] = 0x80 }), &Decisions{}), ReasonReserved},
		{"decisions: model-error flag on a spike",
			DecodeDecisions(mod(dec, func(b []byte) { b[8+5] = FlagModelError }), &Decisions{}), ReasonRange},
		{"decisions: nan prob", DecodeDecisions(mod(dec, func(b []byte) {
			binary.LittleEndian.PutUint32(b[8+24:], math.Float32bits(float32(math.NaN())))
		}), &Decisions{}), ReasonNonFinite},
		{"decisions: frames type", DecodeDecisions(goodFrames(t), &Decisions{}), ReasonType},
		{"control: bad op", DecodeControl(mod(ctl, func(b []byte) { b[4] = 9 }), &Control{}), ReasonRange},
		{"control: negative cell", DecodeControl(mod(ctl, func(b []byte) { b[8+3] = 0x80 }), &Control{}), ReasonRange},
		{"control: truncated", DecodeControl(ctl[:len(ctl)-1], &Control{}), ReasonTruncated},
		{"control: wrong version", DecodeControl(mod(ctl, func(b []byte) { b[0] = 9 }), &Control{}), ReasonVersion},
		{"control: reset with body", DecodeControl(mod(ctl, func(b []byte) { b[4] = OpReset }), &Control{}), ReasonRange},
		{"control: reset at a frame with a history", DecodeControl(mod(ctl, func(b []byte) { b[4] = OpResetAt }), &Control{}), ReasonOversized},
		{"control: reset at a frame, a count", DecodeControl(mod(resetAt, func(b []byte) { b[2] = 1 }), &Control{}), ReasonRange},
		{"control: reset at a frame, truncated", DecodeControl(resetAt[:ResetAtLen-1], &Control{}), ReasonTruncated},
		{"control: reset at a frame, reserved", DecodeControl(mod(resetAt, func(b []byte) { b[13] = 1 }), &Control{}), ReasonReserved},
		{"control: reset at a seq past the range",
			DecodeControl(mod(resetAt, func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 1<<63) }), &Control{}), ReasonRange},
		{"status: truncated", DecodeStatus([]byte{1, 4, 0, 0}, &Status{}), ReasonTruncated},
	}
	for _, c := range cases {
		if Reason(c.err) != c.reason {
			t.Errorf("%s: err %v, want reason %q", c.name, c.err, c.reason)
		}
	}
}

func TestDecodeFramesNoAllocs(t *testing.T) {
	b, _ := AppendFrames(nil, sampleFrames(0, 16))
	var f Frames
	if err := DecodeFrames(b, &f); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, len(b))
	src := sampleFrames(0, 16)
	allocs := testing.AllocsPerRun(200, func() {
		buf, _ = AppendFrames(buf[:0], src)
		if err := DecodeFrames(buf, &f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per encode+decode, want 0", allocs)
	}
}

func TestSubjects(t *testing.T) {
	if StimSubject("dev0") != "rgc.dev0.stim" || SpikesSubject("dev0") != "rgc.dev0.spikes" ||
		ControlSubject("dev0") != "rgc.dev0.ctl" || StatusSubject("dev0") != "rgc.dev0.status" {
		t.Fatal("subject names changed")
	}
	for _, bad := range []string{"", "a.b", "a*", ">", "a b", string(make([]byte, 65))} {
		if CheckDevice(bad) == nil {
			t.Errorf("CheckDevice(%q) accepted", bad)
		}
	}
	if CheckDevice("dev_0-A") != nil {
		t.Error("CheckDevice rejected a good name")
	}
}

// Fuzz targets: every decoder must return an error or a value that encodes
// back to the same bytes, and never panic.

func FuzzDecodeFrames(f *testing.F) {
	f.Add(goodFrames(f))
	f.Add([]byte{1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frames
		if err := DecodeFrames(b, &fr); err != nil {
			if Reason(err) == "" {
				t.Fatalf("error without reason: %v", err)
			}
			return
		}
		out, err := AppendFrames(nil, &fr)
		if err != nil || string(out) != string(b) {
			t.Fatalf("re-encode: err %v, equal %v", err, string(out) == string(b))
		}
	})
}

func FuzzDecodeDecisions(f *testing.F) {
	b, _ := AppendDecisions(nil, &Decisions{Decisions: []Decision{
		{Cell: 1, Kind: KindSpike, End: 10, Bin: 11, Prob: 0.5},
		{Kind: KindSilence, End: 0, Bin: rgc.Horizon},
	}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Decisions
		if err := DecodeDecisions(b, &d); err != nil {
			if Reason(err) == "" {
				t.Fatalf("error without reason: %v", err)
			}
			return
		}
		out, err := AppendDecisions(nil, &d)
		if err != nil || string(out) != string(b) {
			t.Fatalf("re-encode: err %v", err)
		}
	})
}

func FuzzDecodeControl(f *testing.F) {
	h := History{Cell: 4}
	h.Spikes[3] = true
	b, _ := AppendControl(nil, &Control{Op: OpHistory, Histories: []History{h}})
	f.Add(b)
	b, _ = AppendControl(nil, &Control{Op: OpReset})
	f.Add(b)
	b, _ = AppendControl(nil, &Control{Op: OpResetAt, Epoch: 3, At: 5000})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Control
		if err := DecodeControl(b, &c); err != nil {
			if Reason(err) == "" {
				t.Fatalf("error without reason: %v", err)
			}
			return
		}
		out, err := AppendControl(nil, &c)
		if err != nil || string(out) != string(b) {
			t.Fatalf("re-encode: err %v", err)
		}
	})
}

func FuzzDecodeStatus(f *testing.F) {
	b, _ := AppendStatus(nil, &Status{LastSeq: 5, Shard: 0, Shards: 1, Cells: []int32{3, 4}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Status
		if err := DecodeStatus(b, &s); err != nil {
			if Reason(err) == "" {
				t.Fatalf("error without reason: %v", err)
			}
			return
		}
		out, err := AppendStatus(nil, &s)
		if err != nil || string(out) != string(b) {
			t.Fatalf("re-encode: err %v", err)
		}
	})
}

func TestEventRoundTrip(t *testing.T) {
	for _, in := range []Event{
		{Reason: EventFirst, Epoch: 1, First: 0, PrevLast: -1},
		{Reason: EventRestart, Epoch: math.MaxUint32, First: MaxSeq, PrevLast: 12345},
	} {
		b, err := AppendEvent(nil, &in)
		if err != nil || len(b) != EventLen {
			t.Fatalf("%+v: %d bytes, %v", in, len(b), err)
		}
		var out Event
		if err := DecodeEvent(b, &out); err != nil || out != in {
			t.Fatalf("round trip %+v -> %+v, %v", in, out, err)
		}
	}
	good, _ := AppendEvent(nil, &Event{Reason: EventReset, Epoch: 2, First: 10, PrevLast: 5})
	for _, tc := range []struct {
		name   string
		mod    func([]byte) []byte
		reason string
	}{
		{"reason 0", func(b []byte) []byte { b[4] = 0; return b }, ReasonRange},
		{"reason 4", func(b []byte) []byte { b[4] = 4; return b }, ReasonRange},
		{"epoch 0", func(b []byte) []byte { clear(b[8:12]); return b }, ReasonRange},
		{"reserved", func(b []byte) []byte { b[13] = 1; return b }, ReasonReserved},
		{"negative first", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], math.MaxUint64); return b }, ReasonRange},
		{"prev last below -1", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], math.MaxUint64-1); return b }, ReasonRange},
		{"truncated", func(b []byte) []byte { return b[:20] }, ReasonTruncated},
		{"too long", func(b []byte) []byte { return append(b, 0) }, ReasonOversized},
		{"count", func(b []byte) []byte { b[2] = 1; return b }, ReasonRange},
	} {
		var e Event
		if err := DecodeEvent(tc.mod(slices.Clone(good)), &e); Reason(err) != tc.reason {
			t.Errorf("%s: %v, want reason %q", tc.name, err, tc.reason)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	b, _ := AppendEvent(nil, &Event{Reason: EventFirst, Epoch: 1, First: 3, PrevLast: -1})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		if err := DecodeEvent(b, &e); err != nil {
			return
		}
		out, err := AppendEvent(nil, &e)
		if err != nil || !slices.Equal(out, b) {
			t.Fatalf("decoded %+v does not re-encode to the input: %v", e, err)
		}
	})
}
