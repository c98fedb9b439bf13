package nemesis

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"rgcpred/base/msgauth"
)

// Keys turns message authentication on in a run: every instance runs with
// predictord --auth-keys File, the device signs what it sends and checks
// what it receives with its keys, and the flight recorder's audit checks
// the recording with the device's up key and the group's key.
type Keys struct {
	// File is the key file; Parsed what it holds.
	File   string
	Parsed msgauth.KeyFile
}

// NewKeys writes fresh random keys of Device (up and down) and of Group
// to the key file path (mode 600) and reads them back.
func NewKeys(path string) (*Keys, error) {
	var b strings.Builder
	for _, line := range [][2]string{{Device, msgauth.Up}, {Device, msgauth.Down}, {Group, msgauth.Standby}} {
		key := make([]byte, msgauth.KeyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("nemesis: keys: %w", err)
		}
		fmt.Fprintf(&b, "%s %s %s\n", line[0], line[1], hex.EncodeToString(key))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return nil, fmt.Errorf("nemesis: keys: %w", err)
	}
	kf, err := msgauth.LoadKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("nemesis: keys: %w", err)
	}
	return &Keys{File: path, Parsed: kf}, nil
}

// device returns the device's keys.
func (k *Keys) device() msgauth.DeviceKeys { return k.Parsed.Devices[Device] }
