// Package msgauth computes and checks message authenticators: an
// HMAC-SHA256 over a message's subject, the header values that steer its
// receiver and its payload, with a key per device and direction
// (docs/operations.md, "Security", says why a keyed MAC and not
// signatures), and reads key files, which also hold the keys of
// hot-standby groups. It knows nothing of NATS or the protocol:
// stream.Auth applies it to messages.
package msgauth

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
)

// KeyLen is the length of a key in bytes (openssl rand -hex 32 makes one).
const KeyLen = 32

// TagLen is the length of an authenticator in its text form (the
// unpadded URL-safe base64 of the 32-byte HMAC).
const TagLen = 43

// domain separates these authenticators from any other use of a key.
const domain = "rgcpred msgauth v1\x00"

// MAC computes and checks authenticators with one key. It is not safe for
// concurrent use; after warm-up it allocates nothing.
type MAC struct {
	h   hash.Hash
	sum []byte
	tag []byte
	buf []byte
	n   [binary.MaxVarintLen64]byte
}

// New returns a MAC for key, which must be KeyLen bytes.
func New(key []byte) (*MAC, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("msgauth: key of %d bytes, want %d", len(key), KeyLen)
	}
	return &MAC{h: hmac.New(sha256.New, key), sum: make([]byte, 0, sha256.Size), tag: make([]byte, TagLen)}, nil
}

// write adds one length-prefixed field, so that no two different
// (subject, fields, payload) give the same input.
func (m *MAC) write(b []byte) {
	k := binary.PutUvarint(m.n[:], uint64(len(b)))
	m.h.Write(m.n[:k])
	m.h.Write(b)
}

// writeString is write for a string, through a scratch buffer so that it
// allocates nothing.
func (m *MAC) writeString(s string) {
	m.buf = append(m.buf[:0], s...)
	m.write(m.buf)
}

func (m *MAC) compute(subject string, fields []string, payload []byte) []byte {
	m.h.Reset()
	m.buf = append(m.buf[:0], domain...)
	m.h.Write(m.buf)
	m.writeString(subject)
	k := binary.PutUvarint(m.n[:], uint64(len(fields)))
	m.h.Write(m.n[:k])
	for _, f := range fields {
		m.writeString(f)
	}
	m.write(payload)
	m.sum = m.h.Sum(m.sum[:0])
	return m.sum
}

// Tag returns the authenticator of subject, fields (in the order the
// receiver checks them; "" for an absent one) and payload in text form. The
// slice is the MAC's own, valid until its next call.
func (m *MAC) Tag(subject string, fields []string, payload []byte) []byte {
	base64.RawURLEncoding.Encode(m.tag, m.compute(subject, fields, payload))
	return m.tag
}

// Verify reports whether tag is the authenticator of subject, fields and
// payload, in constant time.
func (m *MAC) Verify(tag string, subject string, fields []string, payload []byte) bool {
	if len(tag) != TagLen {
		return false
	}
	want := m.Tag(subject, fields, payload)
	m.buf = append(m.buf[:0], tag...)
	return hmac.Equal(want, m.buf)
}

// Keys are the keys of the devices: Up authenticates what a device sends
// (frames, control), Down what its daemon group sends it (decisions,
// events).
type Keys map[string]DeviceKeys

// DeviceKeys are one device's keys.
type DeviceKeys struct {
	Up, Down []byte
}

// Directions of a key file's lines: Up and Down name a device's keys,
// Standby a hot-standby group's key.
const (
	Up      = "up"
	Down    = "down"
	Standby = "standby"
)

// KeyFile is what a key file holds: the devices' keys, and the key of
// each hot-standby group, with which its instances sign what they tell
// each other (lease values, states, digests). Devices never hold a group
// key.
type KeyFile struct {
	Devices Keys
	Groups  map[string][]byte
}

// ParseKeys reads a key file's device keys (ParseKeyFile).
func ParseKeys(text string) (Keys, error) {
	kf, err := ParseKeyFile(text)
	return kf.Devices, err
}

// ParseKeyFile reads a key file: one key a line, "<device> <up|down> <64
// hex digits>" or "<group> standby <64 hex digits>"; blank lines and
// lines starting with # are skipped. Every device named needs both keys,
// the two must differ (a device's key must not let it forge its daemon's
// decisions), and a group key must differ from every device key (a
// device must not pass as an instance of the group).
func ParseKeyFile(text string) (KeyFile, error) {
	kf := KeyFile{Devices: Keys{}, Groups: map[string][]byte{}}
	ks := kf.Devices
	sc := bufio.NewScanner(strings.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 3 || (f[1] != Up && f[1] != Down && f[1] != Standby) {
			return KeyFile{}, fmt.Errorf("line %d: want \"<device> up|down <%d hex digits>\" or \"<group> standby <%d hex digits>\"", line, 2*KeyLen, 2*KeyLen)
		}
		key, err := hex.DecodeString(f[2])
		if err != nil || len(key) != KeyLen {
			return KeyFile{}, fmt.Errorf("line %d: key of %s: want %d hex digits", line, f[0], 2*KeyLen)
		}
		if f[1] == Standby {
			if kf.Groups[f[0]] != nil {
				return KeyFile{}, fmt.Errorf("line %d: second standby key of group %s", line, f[0])
			}
			kf.Groups[f[0]] = key
			continue
		}
		dk := ks[f[0]]
		p := &dk.Up
		if f[1] == Down {
			p = &dk.Down
		}
		if *p != nil {
			return KeyFile{}, fmt.Errorf("line %d: second %s key of device %s", line, f[1], f[0])
		}
		*p = key
		ks[f[0]] = dk
	}
	if err := sc.Err(); err != nil {
		return KeyFile{}, err
	}
	if len(ks) == 0 {
		return KeyFile{}, errors.New("no device keys")
	}
	for dev, dk := range ks {
		switch {
		case dk.Up == nil || dk.Down == nil:
			return KeyFile{}, fmt.Errorf("device %s: want both an up and a down key", dev)
		case hmac.Equal(dk.Up, dk.Down):
			return KeyFile{}, fmt.Errorf("device %s: the up and down keys are the same", dev)
		}
		for g, gk := range kf.Groups {
			if hmac.Equal(gk, dk.Up) || hmac.Equal(gk, dk.Down) {
				return KeyFile{}, fmt.Errorf("group %s: its standby key is a key of device %s", g, dev)
			}
		}
	}
	return kf, nil
}

// LoadKeys reads a key file's device keys (LoadKeyFile).
func LoadKeys(path string) (Keys, error) {
	kf, err := LoadKeyFile(path)
	return kf.Devices, err
}

// LoadKeyFile reads a key file (ParseKeyFile). It refuses a file that
// others than its owner may read.
func LoadKeyFile(path string) (KeyFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return KeyFile{}, fmt.Errorf("msgauth: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return KeyFile{}, fmt.Errorf("msgauth: key file %s is readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return KeyFile{}, fmt.Errorf("msgauth: %w", err)
	}
	kf, err := ParseKeyFile(string(b))
	if err != nil {
		return KeyFile{}, fmt.Errorf("msgauth: key file %s: %w", path, err)
	}
	return kf, nil
}
