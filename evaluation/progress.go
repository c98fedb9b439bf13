package evaluation

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"rgcpred/rollout"
)

// IsTerminal reports whether w is a terminal (a character device), where
// progress is shown on one line rewritten in place; elsewhere (a file, a
// pipe) progress comes as plain newline-terminated lines.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ProgressLine shows a rollout's or NLL evaluation's progress: on a
// terminal one line rewritten at most every 200 ms, otherwise a line every
// 10 s. A nil writer shows nothing.
type ProgressLine struct {
	w           io.Writer
	tty         bool
	every       time.Duration
	label       string
	start, last time.Time
	p           rollout.Progress
}

// NewProgressLine starts a progress line labelled label on w (nil: none).
func NewProgressLine(w io.Writer, label string) *ProgressLine {
	l := &ProgressLine{w: w, label: label, start: time.Now(), every: 10 * time.Second}
	if IsTerminal(w) {
		l.tty, l.every = true, 200*time.Millisecond
	}
	l.last = l.start
	return l
}

// Update records the latest progress and shows it when due; it has the
// signature of rollout.Options.Progress.
func (l *ProgressLine) Update(p rollout.Progress) {
	l.p = p
	if now := time.Now(); now.Sub(l.last) >= l.every {
		l.last = now
		l.show()
	}
}

// show writes the current state, if there is a writer.
func (l *ProgressLine) show() {
	if l.w == nil {
		return
	}
	el := time.Since(l.start).Seconds()
	frac := 0.0
	if l.p.Total > 0 {
		frac = float64(l.p.Done) / float64(l.p.Total)
	}
	eta := ""
	if frac > 0 && frac < 1 {
		eta = fmt.Sprintf(", %.0f s left", el/frac-el)
	}
	msg := fmt.Sprintf("%s: %5.1f%% (%d windows, %.0f windows/s, %.1f s%s)",
		l.label, 100*frac, l.p.Windows, float64(l.p.Windows)/math.Max(el, 1e-9), el, eta)
	if l.tty {
		fmt.Fprintf(l.w, "\r%s   ", msg)
	} else {
		fmt.Fprintln(l.w, msg)
	}
}

// Finish shows the final state and ends the line.
func (l *ProgressLine) Finish() {
	l.show()
	if l.tty {
		fmt.Fprintln(l.w)
	}
}
