package msgauth

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeyLen) }

// TestVerify: a tag verifies only for the same key, subject, fields (order
// and boundaries included) and payload.
func TestVerify(t *testing.T) {
	m, err := New(key(1))
	if err != nil {
		t.Fatal(err)
	}
	tag := string(m.Tag("rgc.dev0.spikes", []string{"1.2.3", "g.0.1", "7"}, []byte("payload")))
	if len(tag) != TagLen {
		t.Fatalf("tag of %d characters, want %d", len(tag), TagLen)
	}
	other, _ := New(key(2))
	for _, c := range []struct {
		name    string
		m       *MAC
		tag     string
		subject string
		fields  []string
		payload string
		want    bool
	}{
		{"same", m, tag, "rgc.dev0.spikes", []string{"1.2.3", "g.0.1", "7"}, "payload", true},
		{"other key", other, tag, "rgc.dev0.spikes", []string{"1.2.3", "g.0.1", "7"}, "payload", false},
		{"other subject", m, tag, "rgc.dev1.spikes", []string{"1.2.3", "g.0.1", "7"}, "payload", false},
		{"other field", m, tag, "rgc.dev0.spikes", []string{"1.2.4", "g.0.1", "7"}, "payload", false},
		{"moved boundary", m, tag, "rgc.dev0.spikes", []string{"1.2.3g", ".0.1", "7"}, "payload", false},
		{"field dropped", m, tag, "rgc.dev0.spikes", []string{"1.2.3", "g.0.1"}, "payload", false},
		{"other payload", m, tag, "rgc.dev0.spikes", []string{"1.2.3", "g.0.1", "7"}, "payloaD", false},
		{"truncated tag", m, tag[:TagLen-1], "rgc.dev0.spikes", []string{"1.2.3", "g.0.1", "7"}, "payload", false},
		{"no tag", m, "", "rgc.dev0.spikes", []string{"1.2.3", "g.0.1", "7"}, "payload", false},
	} {
		if got := c.m.Verify(c.tag, c.subject, c.fields, []byte(c.payload)); got != c.want {
			t.Errorf("%s: verified %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := New(key(1)[:16]); err == nil {
		t.Error("a 16-byte key accepted")
	}
}

func TestTagAllocatesNothing(t *testing.T) {
	m, _ := New(key(3))
	fields := []string{"1.2.3", "g.0.1"}
	payload := make([]byte, 2648)
	tag := string(m.Tag("rgc.dev0.spikes", fields, payload))
	if n := testing.AllocsPerRun(100, func() {
		m.Tag("rgc.dev0.spikes", fields, payload)
		m.Verify(tag, "rgc.dev0.spikes", fields, payload)
	}); n != 0 {
		t.Fatalf("%v allocations per tag and verify", n)
	}
}

func TestParseKeys(t *testing.T) {
	h := func(b byte) string { return strings.Repeat(string("0123456789abcdef"[b]), 2*KeyLen) }
	for _, c := range []struct {
		name, text, wantErr string
	}{
		{"two devices", "# keys\ndev0 up " + h(1) + "\ndev0 down " + h(2) + "\n\ndev1 up " + h(3) + "\ndev1 down " + h(4) + "\n", ""},
		{"missing down", "dev0 up " + h(1) + "\n", "both an up and a down key"},
		{"same keys", "dev0 up " + h(1) + "\ndev0 down " + h(1) + "\n", "are the same"},
		{"short key", "dev0 up abcd\ndev0 down " + h(2) + "\n", "line 1"},
		{"bad direction", "dev0 sideways " + h(1) + "\n", "line 1"},
		{"twice", "dev0 up " + h(1) + "\ndev0 up " + h(3) + "\n", "second up key"},
		{"empty", "# nothing\n", "no device keys"},
		{"group key", "g standby " + h(5) + "\ndev0 up " + h(1) + "\ndev0 down " + h(2) + "\n\ndev1 up " + h(3) + "\ndev1 down " + h(4) + "\n", ""},
		{"group key twice", "g standby " + h(5) + "\ng standby " + h(6) + "\n", "second standby key"},
		{"group key a device's", "g standby " + h(2) + "\ndev0 up " + h(1) + "\ndev0 down " + h(2) + "\n", "a key of device dev0"},
		{"group key only", "g standby " + h(5) + "\n", "no device keys"},
	} {
		ks, err := ParseKeys(c.text)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.wantErr)
		case c.wantErr == "" && (len(ks) != 2 || !bytes.Equal(ks["dev1"].Down, bytes.Repeat([]byte{0x44}, KeyLen))):
			t.Errorf("%s: keys %x", c.name, ks)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "keys")
	if err := os.WriteFile(p, []byte("dev0 up "+h(1)+"\ndev0 down "+h(2)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key file: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if ks, err := LoadKeys(p); err != nil || len(ks) != 1 {
		t.Fatalf("load: %v", err)
	}
	if err := os.WriteFile(p, []byte("g standby "+h(5)+"\ndev0 up "+h(1)+"\ndev0 down "+h(2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if kf, err := LoadKeyFile(p); err != nil || len(kf.Devices) != 1 || !bytes.Equal(kf.Groups["g"], bytes.Repeat([]byte{0x55}, KeyLen)) {
		t.Fatalf("load a group key: %+v, %v", kf, err)
	}
}

func BenchmarkTag(b *testing.B) {
	m, _ := New(key(3))
	fields := []string{"1.2.3", "g.0.1", "7"}
	payload := make([]byte, stream2648)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		m.Tag("rgc.dev0.spikes", fields, payload)
	}
}

// stream2648 is the payload of a decisions message of 60 cells.
const stream2648 = 8 + 60*44
