package service

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseMicroRequest: the micro endpoints' request parser, fed any
// body, accepts only empty bodies and single JSON objects of the known
// fields; what it accepts marshals back to a body it parses to the same
// request.
func FuzzParseMicroRequest(f *testing.F) {
	for _, s := range []string{"", "  \n", "{}", `{"device":"dev0"}`, `{"device":"dev0","instance":"X"}`,
		`{"device":3}`, `{"devices":"dev0"}`, `{} {}`, `dev0`, `{"device":"\u0000"}`, `null`, `[1]`, `{"device":"a"}garbage`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		q, err := parseMicroRequest(body)
		if err != nil {
			return
		}
		if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && !json.Valid(trimmed) {
			t.Fatalf("accepted %q, not JSON", body)
		}
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseMicroRequest(b)
		if err != nil || back != q {
			t.Fatalf("%q parsed to %+v, marshalled to %s, parsed back to %+v, %v", body, q, b, back, err)
		}
	})
}
