package experiment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"rgcpred/model"
	"rgcpred/model/train"
)

// Training in segments.
//
// train.Run resumes a run from its resume checkpoint, but a resumed run
// does not retrace the run it continues: its batch loader is seeded anew
// from the step (seed ^ step*0x9e37...), whereas an uninterrupted run draws
// every batch from the one stream seeded at step 0, and a validation cut
// short by cancellation is never redone. To make a killed-and-restarted
// experiment finish with the results of an uninterrupted one, every run
// here takes the same path whether or not it is interrupted: it trains in
// segments of Plan.Segment steps, and every segment, interrupted or not,
// is a train.Run resumed from the previous segment's boundary. A boundary
// is the resume checkpoint written at a validation step that is a multiple
// of Plan.Segment, copied (with the best checkpoint as of that step) to
// boundary-STEP.resume and boundary-STEP.ckpt and then committed by the
// manifest; the segment's train.Run is then cancelled, and the few steps it
// took past the boundary are discarded. A killed run continues from its
// last committed boundary, exactly as the uninterrupted run did.
//
// The boundary is taken while train.Run writes a progress line for a step
// past it: train.Run writes its log synchronously, so the resume checkpoint
// on disk is then the one of the last validation, and a progress line
// after it shows that training went on (early stopping did not end the run
// there). Progress lines come every step (ProgressEvery 1 ns). Were their
// format to change, no boundary would be taken: killed runs would start
// over, still reproducibly.

// segmentFiles are the files of a run directory.
type segmentFiles struct{ dir string }

func (f segmentFiles) best() string   { return filepath.Join(f.dir, "model.ckpt") }
func (f segmentFiles) resume() string { return f.best() + ".resume" }
func (f segmentFiles) log() string    { return filepath.Join(f.dir, "train.log") }
func (f segmentFiles) boundaryResume(step int) string {
	return filepath.Join(f.dir, fmt.Sprintf("boundary-%d.resume", step))
}
func (f segmentFiles) boundaryBest(step int) string {
	return filepath.Join(f.dir, fmt.Sprintf("boundary-%d.ckpt", step))
}

// removeBoundaries deletes the boundary files of every step but keep.
func (f segmentFiles) removeBoundaries(keep int) error {
	m, err := filepath.Glob(filepath.Join(f.dir, "boundary-*"))
	if err != nil {
		return err
	}
	for _, p := range m {
		if p == f.boundaryResume(keep) || p == f.boundaryBest(keep) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// restore prepares the run directory for a segment that starts at step
// (0: a fresh start): the best checkpoint as of that step, no resume
// checkpoint of a discarded segment tail. It returns the resume checkpoint
// to continue from ("" for a fresh start). A boundary without a best
// checkpoint whose resume state records a best model is refused.
func (f segmentFiles) restore(step int) (string, error) {
	if err := os.Remove(f.resume()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("restore boundary: %w", err)
	}
	if step == 0 {
		if err := os.Remove(f.best()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("restore boundary: %w", err)
		}
		return "", nil
	}
	ck, err := model.LoadCheckpoint(f.boundaryResume(step))
	if err != nil {
		return "", fmt.Errorf("restore boundary at step %d: %w", step, err)
	}
	bestStep, _, hasBest, err := train.RecordedBest(ck)
	if err != nil {
		return "", fmt.Errorf("restore boundary at step %d: %s: %w", step, f.boundaryResume(step), err)
	}
	switch _, err := os.Stat(f.boundaryBest(step)); {
	case err == nil:
		// A damaged copy would become the run's best model unnoticed.
		if _, err := model.LoadCheckpoint(f.boundaryBest(step)); err != nil {
			return "", fmt.Errorf("restore boundary at step %d: %w", step, err)
		}
		if err := copyFileAtomic(f.boundaryBest(step), f.best()); err != nil {
			return "", fmt.Errorf("restore boundary at step %d: %w", step, err)
		}
	case errors.Is(err, fs.ErrNotExist) && hasBest:
		// Training on without it would lose the run's best model.
		return "", fmt.Errorf("restore boundary at step %d: %s is missing, but %s records a best model at step %d",
			step, f.boundaryBest(step), f.boundaryResume(step), bestStep)
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Remove(f.best()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("restore boundary: %w", err)
		}
	default:
		return "", fmt.Errorf("restore boundary at step %d: %w", step, err)
	}
	return f.boundaryResume(step), nil
}

// trainRun trains run r (index i of the grid) to the end of its budget,
// segment by segment, continuing from its last boundary. It returns the
// context's error when ctx ends first. Runs train concurrently: each has
// its own directory, and r is changed only through x.commit.
func (x *exp) trainRun(ctx context.Context, i int, r *RunState) error {
	f := segmentFiles{dir: x.runDir(r)}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("run %s: %w", r.Name, err)
	}
	logFile, err := os.OpenFile(f.log(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("run %s: %w", r.Name, err)
	}
	defer logFile.Close()
	cfg, err := model.ParseConfigName(r.Config, len(x.cells))
	if err != nil {
		return fmt.Errorf("run %s: %w", r.Name, err)
	}
	wall0, start := r.WallSeconds, time.Now()
	wall := func() float64 { return wall0 + time.Since(start).Seconds() }
	if err := x.commit(func() {
		if r.Status == StatusPending {
			r.Status = StatusTraining
		}
	}); err != nil {
		return err
	}
	x.runStarted(i, r)
	// A run that returns before runFinished leaves training at its latest
	// progress; after runFinished this is a no-op.
	defer x.runLeft(i, -1)
	// left saves the wall time of a run stopped before its end.
	left := func(err error) error {
		return errors.Join(err, x.commit(func() { r.WallSeconds = wall() }))
	}
	for {
		if err := ctx.Err(); err != nil {
			return left(err)
		}
		resume, err := f.restore(r.BoundaryStep)
		if err != nil {
			return fmt.Errorf("run %s: %w", r.Name, err)
		}
		segCtx, cancel := context.WithCancel(ctx)
		lw := &segmentLog{x: x, i: i, r: r, files: f, file: logFile, cancel: cancel, wall: wall}
		o := train.Options{
			Data: x.plan.Data, Rec: x.rec, Cells: x.cells, Config: cfg,
			Steps: x.plan.Budget.steps(x.plan.Batch), Batch: x.plan.Batch, LR: x.plan.LR,
			ValEvery: x.plan.ValEvery, ValWindows: x.plan.ValWindows,
			TimeBudget: time.Duration(x.plan.Budget.Time),
			// One graph over the plan's threads, as every run of a plan
			// had: replicas would change batch norm's statistics
			// (Options.Replicas).
			Seed: r.Seed, Threads: x.plan.Threads, Replicas: 1, Out: f.best(), Resume: resume,
			Log: lw, ProgressEvery: time.Nanosecond,
			Notes: fmt.Sprintf("trainer experiment %s, run %s", x.dir, r.Name),
		}
		res, err := train.Run(segCtx, o)
		cancel()
		lw.flush()
		if err == nil {
			err = lw.err
		}
		if err != nil {
			return left(fmt.Errorf("run %s: %w", r.Name, err))
		}
		if lw.committed {
			continue // the next segment, from the new boundary
		}
		if res.Interrupted || ctx.Err() != nil {
			return left(ctx.Err())
		}
		if err := x.commit(func() {
			r.Status = StatusTrained
			r.Steps, r.BestStep, r.BestVal, r.Stopped = res.Steps, res.BestStep, res.BestVal, res.Stopped
			r.Samples = int64(res.Steps) * int64(x.plan.Batch)
			r.TrainSeconds, r.WallSeconds = res.Elapsed.Seconds(), wall()
		}); err != nil {
			return err
		}
		if err := f.removeBoundaries(-1); err != nil {
			return fmt.Errorf("run %s: %w", r.Name, err)
		}
		x.runFinished(i, r)
		return nil
	}
}

// segmentLog receives one segment's train.Run log: it keeps the run's log
// file, feeds the experiment's progress lines and takes the segment's
// boundary.
type segmentLog struct {
	x      *exp
	i      int
	r      *RunState
	files  segmentFiles
	file   *os.File
	cancel context.CancelFunc
	wall   func() float64

	mu        sync.Mutex
	buf       []byte
	seen      os.FileInfo // the resume checkpoint last inspected
	lastLog   time.Time   // the last progress line copied to the log file
	committed bool        // a new boundary was committed; the segment is over
	err       error
}

// Write takes train.Run's log output, line by line.
func (l *segmentLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// flush handles a last unterminated line.
func (l *segmentLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.line(string(l.buf))
		l.buf = nil
	}
}

// line handles one log line: progress lines ("step N/M ...", one per step)
// update the progress and may take a boundary; every other line, and a
// progress line every 10 s, goes to the run's log file.
func (l *segmentLog) line(s string) {
	var step, steps int
	if n, _ := fmt.Sscanf(s, "step %d/%d", &step, &steps); n == 2 {
		if l.committed {
			return // the discarded tail of the segment
		}
		l.x.stepProgress(l.i, l.r, step, l.wall())
		if time.Since(l.lastLog) >= 10*time.Second {
			l.lastLog = time.Now()
			fmt.Fprintln(l.file, s)
		}
		if err := l.boundary(step); err != nil {
			l.err = err
			l.cancel()
		}
		return
	}
	if l.committed {
		return
	}
	fmt.Fprintln(l.file, s)
	var val float64
	if n, _ := fmt.Sscanf(s, "step %d: val NLL %g", &step, &val); n == 2 {
		l.x.valProgress(l.i, l.r, step, val, l.wall())
	}
}

// boundary takes the segment's boundary, if the resume checkpoint on disk
// is one: written at a validation step that is a multiple of the segment
// length, past the run's last boundary and before step (the step train.Run
// has just taken). It copies the resume and best checkpoints to the
// boundary files, commits the boundary in the manifest, removes the older
// boundary and cancels the segment.
func (l *segmentLog) boundary(step int) error {
	seg := l.x.plan.Segment
	if seg == 0 {
		return nil
	}
	st, err := os.Stat(l.files.resume())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("boundary: %w", err)
	}
	if l.seen != nil && os.SameFile(st, l.seen) && st.ModTime().Equal(l.seen.ModTime()) && st.Size() == l.seen.Size() {
		return nil
	}
	l.seen = st
	data, err := os.ReadFile(l.files.resume())
	if err != nil {
		return fmt.Errorf("boundary: %w", err)
	}
	ck, err := model.ReadCheckpoint(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("boundary: %s: %w", l.files.resume(), err)
	}
	at := ck.Provenance.Steps
	// ValNLL is set only in a resume checkpoint written right after the
	// validation of its step.
	if at <= l.r.BoundaryStep || at%seg != 0 || at >= step || !(ck.Provenance.ValNLL > 0) {
		return nil
	}
	if err := writeFileAtomic(l.files.boundaryResume(at), data); err != nil {
		return fmt.Errorf("boundary: %w", err)
	}
	switch _, err := os.Stat(l.files.best()); {
	case err == nil:
		if err := copyFileAtomic(l.files.best(), l.files.boundaryBest(at)); err != nil {
			return fmt.Errorf("boundary: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Remove(l.files.boundaryBest(at)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("boundary: %w", err)
		}
	default:
		return fmt.Errorf("boundary: %w", err)
	}
	if err := l.x.commit(func() { l.r.BoundaryStep, l.r.WallSeconds = at, l.wall() }); err != nil {
		return fmt.Errorf("boundary: %w", err)
	}
	if err := l.files.removeBoundaries(at); err != nil {
		return fmt.Errorf("boundary: %w", err)
	}
	fmt.Fprintf(l.file, "experiment: segment boundary at step %d saved\n", at)
	l.committed = true
	l.cancel()
	l.x.event("boundary", l.r, at)
	return nil
}
