// Package testrec holds recording helpers shared by the tests of several
// packages: a short prefix of the shipped recording (the daemon core and
// service tests compare against the offline rollout on one) and a synthetic
// recording written to a temporary directory (the trainer and replay tests).
package testrec

import (
	"sync"
	"testing"

	"rgcpred/rgc"
)

// Prefix returns the first bins bins of r: the stimulus slices share r's
// storage and each cell keeps its spikes before bin bins. bins must not
// exceed r.Bins.
func Prefix(r *rgc.Recording, bins int) *rgc.Recording {
	p := &rgc.Recording{Name: r.Name, SampleRateHz: r.SampleRateHz, Bins: bins}
	for c := range p.Stimulus {
		p.Stimulus[c] = r.Stimulus[c][:bins]
	}
	for _, c := range r.Cells {
		nc := rgc.Cell{ClusterID: c.ClusterID, Quality: c.Quality}
		for _, b := range c.SpikeBins {
			if int(b) < bins {
				nc.SpikeBins = append(nc.SpikeBins, b)
			}
		}
		p.Cells = append(p.Cells, nc)
	}
	return p
}

// Loader loads one recording at most once per test binary and hands out
// prefixes of it. Declare one per test package, e.g.
// `var shipped = testrec.Loader{Dir: "../../data/chicken-17-08-21"}`.
type Loader struct {
	// Dir is the recording directory, relative to the test's package.
	Dir string

	once sync.Once
	rec  *rgc.Recording
	err  error
}

// Prefix returns the first bins bins of the recording, loading it on first
// use; a load error fails the test.
func (l *Loader) Prefix(t testing.TB, bins int) *rgc.Recording {
	t.Helper()
	l.once.Do(func() { l.rec, l.err = rgc.Load(l.Dir) })
	if l.err != nil {
		t.Fatal(l.err)
	}
	return Prefix(l.rec, bins)
}
