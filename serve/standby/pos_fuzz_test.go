package standby

import (
	"strings"
	"testing"

	"rgcpred/stream"
)

// FuzzParsePos: a Rgc-Pos header from the network, whatever its text,
// parses to a position whose header form parses back to it, or is refused
// with an error naming the header.
func FuzzParsePos(f *testing.F) {
	for _, s := range []string{"1.2.3", "0.0.0", "4294967295.9223372036854775807.2147483647", "1.-5.0", "4294967296.0.0",
		"1.2", "1.2.3.4", "", "..", "+1.+2.+3", "1.2.-2147483649", " 1.2.3", "a.b.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := stream.ParsePos(s)
		if err != nil {
			if !strings.Contains(err.Error(), "position") {
				t.Fatalf("stream.ParsePos(%q): error %q does not say what it parsed", s, err)
			}
			return
		}
		back, err := stream.ParsePos(p.String())
		if err != nil || back != p {
			t.Fatalf("stream.ParsePos(%q) = %+v, whose header form %q parses to %+v, %v", s, p, p.String(), back, err)
		}
	})
}
