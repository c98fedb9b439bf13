package testrec

import (
	"context"
	"testing"

	"rgcpred/rgc/synth"
)

// SynthDir generates a synthetic recording with cfg and writes it, with its
// truth.json, to a fresh temporary directory of t, which it returns. It
// fails the test on any error.
func SynthDir(t testing.TB, cfg synth.Config) string {
	t.Helper()
	dir := t.TempDir()
	raw, truth, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Write(dir); err != nil {
		t.Fatal(err)
	}
	if err := truth.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}
