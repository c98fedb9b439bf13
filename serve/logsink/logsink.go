// Package logsink builds predictord's logger: zerolog lines written through
// a non-blocking buffer (a diode) in front of the output, so that logging
// never waits for a slow stderr on a processing goroutine. Lines logged
// while the buffer is full are dropped and counted.
package logsink

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/diode"
)

// BufferLines is the capacity of the buffer: lines logged while it is full
// are dropped (and counted) rather than block the caller.
const BufferLines = 4096

// Sink is the logger's writer. Close it on exit to write out the buffer.
type Sink struct {
	w       diode.Writer
	dropped atomic.Uint64
}

// Dropped returns the number of lines dropped so far.
func (l *Sink) Dropped() uint64 { return l.dropped.Load() }

// Close writes out the buffered lines and stops the writer, waiting at most
// timeout for a blocked output. The output itself is not closed.
func (l *Sink) Close(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- l.w.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("log output blocked: buffered lines lost after %v", timeout)
	}
}

// noClose hides the output's Close from the diode, which would close it.
type noClose struct{ io.Writer }

// New returns a logger of the level (debug, info, warn, error) and format
// (json, console, or auto: console when out is a terminal) writing through
// a Sink to out, every line tagged svc=name; dropped counts the lines lost
// to a full buffer (nil: not counted).
func New(name, level, format string, out io.Writer, dropped prometheus.Counter) (zerolog.Logger, *Sink, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, nil, fmt.Errorf("--log-level: %w", err)
	}
	var w io.Writer = noClose{out}
	switch format {
	case "json":
	case "console":
		w = noClose{zerolog.ConsoleWriter{Out: out, TimeFormat: "15:04:05.000"}}
	case "auto":
		if f, ok := out.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			w = noClose{zerolog.ConsoleWriter{Out: out, TimeFormat: "15:04:05.000"}}
		}
	default:
		return zerolog.Logger{}, nil, fmt.Errorf("--log-format %q: want json, console or auto", format)
	}
	sink := &Sink{}
	var log zerolog.Logger
	// The alert runs on the diode's writing goroutine when it finds lines
	// overwritten; the note it logs goes through the diode like any line.
	sink.w = diode.NewWriter(w, BufferLines, 0, func(missed int) {
		sink.dropped.Add(uint64(missed))
		if dropped != nil {
			dropped.Add(float64(missed))
		}
		log.Warn().Int("lines", missed).Uint64("total", sink.dropped.Load()).Msg("log output too slow: lines dropped")
	})
	log = zerolog.New(sink.w).Level(lvl).With().Timestamp().Str("svc", name).Logger()
	return log, sink, nil
}
