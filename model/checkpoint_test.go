package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/rgc"
)

func testCheckpoint(t testing.TB, name string, cells int) *Checkpoint {
	t.Helper()
	cfg, err := ParseConfigName(name, cells)
	if err != nil {
		t.Fatal(err)
	}
	w := InitWeights(cfg, rand.New(rand.NewPCG(1, uint64(cells))))
	ids := make([]int, cells)
	for i := range ids {
		ids[i] = 100 + 7*i
	}
	return &Checkpoint{
		Weights: w, CellIDs: ids, BinRateHz: 17852.76785 / 18, WindowBins: 1024, Horizon: 80,
		Provenance: Provenance{Data: "data/chicken-17-08-21", Steps: 1234, ValNLL: 2.5, ZeroInputNLL: 3.1,
			TrainedAt: "2026-11-21T21:00:00Z", Notes: "test"},
		TrainState: []byte("adam moments here"),
	}
}

func encode(t testing.TB, c *Checkpoint) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, name := range []string{"gpt-a-cat-cpu", "gpt-b-logmix-cpu", "gpt-a-cat"} {
		c := testCheckpoint(t, name, 3)
		path := filepath.Join(t.TempDir(), "model.ckpt")
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
		got, err := LoadCheckpoint(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got.Equal(c) {
			t.Errorf("%s: loaded checkpoint differs from saved", name)
		}
		// No temporary files left behind.
		ents, _ := os.ReadDir(filepath.Dir(path))
		if len(ents) != 1 {
			t.Errorf("%s: %d files in the directory after Save, want 1", name, len(ents))
		}
	}
	// Without train state, TrainState stays nil.
	c := testCheckpoint(t, "gpt-a-cat-cpu", 2)
	c.TrainState = nil
	got, err := ReadCheckpoint(bytes.NewReader(encode(t, c)))
	if err != nil || got.TrainState != nil || !got.Equal(c) {
		t.Errorf("no train state: err %v, state %q", err, got.TrainState)
	}
}

// withCRC recomputes the trailing checksum of a checkpoint image.
func withCRC(b []byte) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crcTable))
	return b
}

// rewriteHeader re-encodes a checkpoint image with its header changed by f
// (and a valid checksum), to test validation behind the checksum.
func rewriteHeader(t *testing.T, b []byte, f func(h map[string]any)) []byte {
	t.Helper()
	hlen := binary.LittleEndian.Uint32(b[12:])
	var h map[string]any
	if err := json.Unmarshal(b[16:16+hlen], &h); err != nil {
		t.Fatal(err)
	}
	f(h)
	hj, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:16]...)
	binary.LittleEndian.PutUint32(out[12:], uint32(len(hj)))
	out = append(out, hj...)
	out = append(out, b[16+hlen:]...)
	return withCRC(out)
}

func TestCheckpointCorrupt(t *testing.T) {
	good := encode(t, testCheckpoint(t, "gpt-a-cat-cpu", 2))
	hlen := int(binary.LittleEndian.Uint32(good[12:]))
	dataStart := 16 + hlen
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x10
		return b
	}
	nanWeight := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(nanWeight[dataStart+8:], math.Float32bits(float32(math.NaN())))
	nanWeight = withCRC(nanWeight)

	cases := []struct {
		name, data, want string
		b                []byte
	}{
		{name: "empty", b: nil, want: "short preamble"},
		{name: "bad magic", b: append([]byte("NOTACKPT"), good[8:]...), want: "bad magic"},
		{name: "future version", b: func() []byte { b := append([]byte(nil), good...); b[8] = 2; return b }(), want: "version 2"},
		{name: "huge header length", b: func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint32(b[12:], 0xffffffff)
			return b
		}(), want: "exceeds"},
		{name: "truncated header", b: good[:16+hlen/2], want: "truncated in header"},
		{name: "truncated data", b: good[:dataStart+1000], want: "truncated in tensor"},
		{name: "truncated checksum", b: good[:len(good)-2], want: "truncated before the checksum"},
		{name: "trailing byte", b: append(append([]byte(nil), good...), 0), want: "trailing"},
		{name: "flipped data bit", b: flip(dataStart + 100), want: "checksum mismatch"},
		{name: "flipped last weight bit", b: flip(len(good) - 30), want: "checksum mismatch"},
		{name: "flipped checksum", b: flip(len(good) - 1), want: "checksum mismatch"},
		{name: "flipped header byte", b: flip(40), want: "checkpoint"},
		{name: "NaN weight behind a valid checksum", b: nanWeight, want: "is NaN"},
		{name: "tensor shape", b: rewriteHeader(t, good, func(h map[string]any) {
			h["tensors"].([]any)[0].(map[string]any)["shape"] = []int{8, 5, 20}
		}), want: "cnn.conv1.weight [8 5 20]"},
		{name: "tensor order", b: rewriteHeader(t, good, func(h map[string]any) {
			ts := h["tensors"].([]any)
			ts[0], ts[1] = ts[1], ts[0]
		}), want: "tensor 0 is cnn.bn1.weight"},
		{name: "offset", b: rewriteHeader(t, good, func(h map[string]any) {
			h["tensors"].([]any)[3].(map[string]any)["offset"] = 12
		}), want: "at byte 12"},
		{name: "data size", b: rewriteHeader(t, good, func(h map[string]any) { h["data_bytes"] = 5 }), want: "data section"},
		{name: "huge train state", b: rewriteHeader(t, good, func(h map[string]any) { h["train_state_bytes"] = 1 << 40 }), want: "train state"},
		{name: "train state past end", b: rewriteHeader(t, good, func(h map[string]any) { h["train_state_bytes"] = 1 << 20 }), want: "truncated in train state"},
		{name: "unknown stem", b: rewriteHeader(t, good, func(h map[string]any) {
			h["config"].(map[string]any)["stem"] = "gpt-z"
		}), want: "unknown stem"},
		{name: "huge model", b: rewriteHeader(t, good, func(h map[string]any) {
			h["config"].(map[string]any)["num_cells"] = 1 << 19
			h["config"].(map[string]any)["head_dim"] = 1 << 19
		}), want: "limit"},
		{name: "cell ids count", b: rewriteHeader(t, good, func(h map[string]any) { h["cell_ids"] = []int{1, 2, 3} }), want: "3 cell ids for 2"},
		{name: "duplicate cell ids", b: rewriteHeader(t, good, func(h map[string]any) { h["cell_ids"] = []int{4, 4} }), want: "cell id 4"},
		{name: "bad bin rate", b: rewriteHeader(t, good, func(h map[string]any) { h["bin_rate_hz"] = -1 }), want: "bin rate"},
		{name: "window", b: rewriteHeader(t, good, func(h map[string]any) { h["window_bins"] = 512 }), want: "window of 512"},
		{name: "horizon", b: rewriteHeader(t, good, func(h map[string]any) { h["horizon"] = 79 }), want: "horizon 79"},
		{name: "header not JSON", b: withCRC(append(append(append([]byte(nil), good[:16]...), bytes.Repeat([]byte("x"), hlen)...), good[dataStart:]...)), want: "header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ck, err := ReadCheckpoint(bytes.NewReader(c.b))
			if err == nil {
				t.Fatalf("no error (checkpoint %v)", ck != nil)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
	// Every truncation point is an error.
	for n := 0; n < len(good); n += 1 + n/3 {
		if _, err := ReadCheckpoint(bytes.NewReader(good[:n])); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
		}
	}
}

func TestLoadCheckpointMissingFile(t *testing.T) {
	_, err := LoadCheckpoint(filepath.Join(t.TempDir(), "none.ckpt"))
	if err == nil || !strings.Contains(err.Error(), "none.ckpt") {
		t.Errorf("error %v should name the missing file", err)
	}
}

func TestSaveRejectsInvalid(t *testing.T) {
	c := testCheckpoint(t, "gpt-a-cat-cpu", 2)
	c.CellIDs = []int{1}
	path := filepath.Join(t.TempDir(), "x.ckpt")
	if err := c.Save(path); err == nil {
		t.Fatal("Save of an invalid checkpoint succeeded")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("failed Save left %s behind", path)
	}
}

// FuzzReadCheckpoint feeds arbitrary bytes to the reader, either as a whole
// file or with a valid checksum appended (to get past the checksum into the
// validation code). It must never panic, and anything it accepts must be
// valid and re-encode to a checkpoint that reads back equal.
func FuzzReadCheckpoint(f *testing.F) {
	good := encode(f, testCheckpoint(f, "gpt-a-cat-cpu", 1))
	f.Add(good, false)
	f.Add(good[:len(good)-4], true)
	f.Add(good[:200], false)
	f.Add([]byte(checkpointMagic), true)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC {
			b = binary.LittleEndian.AppendUint32(append([]byte(nil), b...), crc32.Checksum(b, crcTable))
		}
		c, err := ReadCheckpoint(bytes.NewReader(b))
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid checkpoint: %v", err)
		}
		var out bytes.Buffer
		if err := c.Write(&out); err != nil {
			t.Fatalf("accepted checkpoint does not re-encode: %v", err)
		}
		c2, err := ReadCheckpoint(&out)
		if err != nil || !c2.Equal(c) {
			t.Fatalf("re-encoded checkpoint reads back differently: %v", err)
		}
	})
}

// TestCheckpointStimMode checks that the stimulus mode round-trips, that a
// file without one reads as zero-phase (the only mode before modes were
// recorded), that an unknown one is refused, and that CheckInput refuses
// the other mode both ways, naming both.
func TestCheckpointStimMode(t *testing.T) {
	for _, mode := range []rgc.StimMode{rgc.StimCausal, rgc.StimZeroPhase} {
		c := testCheckpoint(t, "gpt-a-cat-cpu", 2)
		c.StimMode = mode
		got, err := ReadCheckpoint(bytes.NewReader(encode(t, c)))
		if err != nil || got.StimMode != mode || !got.Equal(c) {
			t.Fatalf("%v: read back mode %v, err %v", mode, got.StimMode, err)
		}
		other := rgc.StimCausal
		if mode == rgc.StimCausal {
			other = rgc.StimZeroPhase
		}
		if err := got.CheckInput(mode); err != nil {
			t.Errorf("%v model on %v input: %v", mode, mode, err)
		}
		err = got.CheckInput(other)
		if err == nil || !strings.Contains(err.Error(), mode.String()) || !strings.Contains(err.Error(), other.String()) {
			t.Errorf("%v model on %v input: %v, want an error naming both", mode, other, err)
		}
	}
	c := testCheckpoint(t, "gpt-a-cat-cpu", 2)
	old := rewriteHeader(t, encode(t, c), func(h map[string]any) { delete(h, "stim_mode") })
	got, err := ReadCheckpoint(bytes.NewReader(old))
	if err != nil || got.StimMode != rgc.StimZeroPhase {
		t.Errorf("a file without a mode read as %v (err %v), want zero-phase", got.StimMode, err)
	}
	bad := rewriteHeader(t, encode(t, c), func(h map[string]any) { h["stim_mode"] = "acausal" })
	if _, err := ReadCheckpoint(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "acausal") {
		t.Errorf("unknown mode: %v", err)
	}
}
