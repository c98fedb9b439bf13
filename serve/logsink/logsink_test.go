package logsink

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// blockedWriter blocks every Write until released, then records.
type blockedWriter struct {
	release chan struct{}
	mu      sync.Mutex
	b       strings.Builder
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *blockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestLogNeverBlocks: with the log output blocked, logging returns at once
// (lines beyond the buffer are dropped and counted); once the output moves
// again, closing the sink writes out the lines logged since and the drop
// count.
func TestLogNeverBlocks(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			w := &blockedWriter{release: make(chan struct{})}
			dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
			log, sink, err := New("test", "info", format, w, dropped)
			if err != nil {
				t.Fatal(err)
			}
			const lines = 3 * BufferLines
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range lines {
					log.Info().Int("i", i).Msg("line")
				}
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("logging blocked on a blocked output")
			}
			// Which of the lines logged while blocked survive depends on
			// where the diode's reader stood; a line logged once the
			// output moves again must reach it by Close.
			close(w.release)
			log.Info().Msg("the last line")
			if err := sink.Close(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			out := w.String()
			if !strings.Contains(out, "the last line") {
				t.Error("the last line was not written out on close")
			}
			written := 0 // the lines "line", JSON or console (bold message)
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, `"message":"line"`) || strings.Contains(l, "\x1b[1mline\x1b[0m") {
					written++
				}
			}
			var m dto.Metric
			if err := dropped.Write(&m); err != nil {
				t.Fatal(err)
			}
			n := int(m.GetCounter().GetValue())
			if n == 0 || uint64(n) != sink.Dropped() || !strings.Contains(out, "lines dropped") {
				t.Fatalf("%d lines dropped (sink says %d), %d written; want the drops counted and reported", n, sink.Dropped(), written)
			}
			// The diode counts a lap of the buffer as dropped lines even when
			// part of it is written out later, so the count may exceed the
			// loss, never fall short of it.
			if written+n < lines {
				t.Errorf("%d lines written + %d dropped < %d logged: lines lost uncounted", written, n, lines)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	for _, c := range []struct{ level, format, want string }{
		{"loud", "json", "--log-level"},
		{"info", "xml", "--log-format"},
	} {
		if _, _, err := New("test", c.level, c.format, &strings.Builder{}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("level %q format %q: %v, want an error naming %s", c.level, c.format, err, c.want)
		}
	}
}
