package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"rgcpred/base/rt"
	"rgcpred/bench/replay"
)

// RTOptions configure the real-time comparison (CompareRealTime).
type RTOptions struct {
	// Options are the points' settings (Options.RealTime is set per row,
	// Options.Trace always).
	Options
	// Settings are the real-time mode's.
	Settings rt.Settings
	// Beside starts the CPU-heavy job that runs beside the daemon in the
	// second half of the comparison.
	Beside func() (*Job, error)
	// ProbeSeconds is how long the wake-up probe runs per condition.
	ProbeSeconds float64
	// GoalP99 is the p99 the report holds each row to.
	GoalP99 time.Duration
}

// Job is a job running beside the daemon (RTOptions.Beside).
type Job struct {
	// Desc describes the job in the report.
	Desc string
	// Stop ends the job and waits for it.
	Stop func() error
	// CPU returns the CPU time the job has used so far (an error where it
	// cannot be read).
	CPU func() (time.Duration, error)
}

// RTReport is the real-time comparison: the daemon with the mode off and
// on, quiet and beside a CPU-heavy job, and the host's wake-up floor under
// each condition.
type RTReport struct {
	Started   time.Time `json:"started"`
	Machine   string    `json:"machine"`
	Model     string    `json:"model"`
	ModelInfo string    `json:"model_info"`
	// Applied is what the mode applied (rt.State), and Fallback the parts
	// it could not, the privileges they lack ("" when all applied).
	Applied  string  `json:"applied"`
	Fallback string  `json:"fallback,omitempty"`
	GoalP99  float64 `json:"goal_p99_ms"`
	Rows     []RTRow `json:"rows"`
}

// RTRow is one condition of the comparison.
type RTRow struct {
	// Beside is "quiet" or the job beside the daemon; Mode "off" or "on".
	Beside string `json:"beside"`
	Mode   string `json:"mode"`
	// Floor is the wake-up probe's overshoot under this condition
	// (rt.Probe: a SCHED_FIFO thread sleeping 1 ms intervals; measured once
	// per condition, before the mode's rows); FloorFIFO whether the probe
	// ran at SCHED_FIFO.
	Floor     replay.DurationSummary `json:"floor"`
	FloorFIFO bool                   `json:"floor_fifo"`
	Points    []Point                `json:"points"`
	// BesideCores is the cores the job beside kept busy during the row
	// (CPU time over wall time; 0 quiet or unknown): what the mode costs
	// it.
	BesideCores float64 `json:"beside_cores,omitempty"`
}

// probeInterval is the wake-up probe's sleep (cyclictest -i 1000).
const probeInterval = time.Millisecond

// CompareRealTime measures, in one run: quiet, the host's wake-up floor,
// then o's cell counts with the real-time mode off and on; then the same
// beside the job o.Beside starts.
func CompareRealTime(ctx context.Context, o RTOptions) (*RTReport, error) {
	if o.Beside == nil {
		return nil, errors.New("bench: no job to run beside the daemon")
	}
	if err := o.Settings.Check(); err != nil {
		return nil, err
	}
	st, err := rt.Apply(o.Settings)
	rep := &RTReport{
		Started: time.Now().UTC(), Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		Model: o.ModelPath, ModelInfo: o.Model.Name, Applied: st.String(), GoalP99: float64(o.GoalP99) / float64(time.Millisecond),
	}
	if err != nil {
		rep.Fallback = err.Error()
	}
	if err := st.Undo(); err != nil {
		return nil, err
	}
	o.Trace = true
	condition := func(beside string, job *Job) error {
		pr, err := rt.Probe(ctx, probeInterval, time.Duration(o.ProbeSeconds*float64(time.Second)), o.Settings.Priority)
		if err != nil {
			return err
		}
		var floor replay.Durations
		for _, d := range pr.Overshoots {
			floor.Add(d)
		}
		for _, mode := range []string{"off", "on"} {
			po := o.Options
			if mode == "on" {
				po.RealTime = &o.Settings
			}
			t0, cpu0 := time.Now(), jobCPU(job)
			r, err := Run(ctx, po)
			if err != nil {
				return fmt.Errorf("%s, mode %s: %w", beside, mode, err)
			}
			row := RTRow{Beside: beside, Mode: mode, Floor: floor.Summary(), FloorFIFO: pr.FIFO, Points: r.Points}
			if cpu1 := jobCPU(job); cpu0 >= 0 && cpu1 >= 0 {
				row.BesideCores = (cpu1 - cpu0).Seconds() / time.Since(t0).Seconds()
			}
			rep.Rows = append(rep.Rows, row)
		}
		return nil
	}
	if err := condition("quiet", nil); err != nil {
		return nil, err
	}
	job, err := o.Beside()
	if err != nil {
		return nil, fmt.Errorf("bench: start the job beside the daemon: %w", err)
	}
	time.Sleep(time.Second) // the job at full speed
	err = condition(job.Desc, job)
	if serr := job.Stop(); err == nil && serr != nil {
		err = fmt.Errorf("bench: stop the job beside the daemon: %w", serr)
	}
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// jobCPU returns the CPU time job has used, -1 for none or unknown.
func jobCPU(job *Job) time.Duration {
	if job == nil || job.CPU == nil {
		return -1
	}
	d, err := job.CPU()
	if err != nil {
		return -1
	}
	return d
}

// WriteTable prints the comparison: per condition the host's floor, then
// per mode and cell count the latency, misses and, where the goal fails,
// the parts of the slowest 1% of the decisions.
func (r *RTReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "real-time comparison: model %s (%s); %s\n", r.Model, r.ModelInfo, r.Machine)
	fmt.Fprintf(w, "mode on: %s", r.Applied)
	if r.Fallback != "" {
		fmt.Fprintf(w, "; NOT applied: %s", r.Fallback)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-24s %-5s %6s %8s %8s %8s %8s %7s %6s %6s %5s %5s\n", "beside", "mode", "cells", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "misses", "cpu", "job", "load", "goal")
	last := ""
	for _, row := range r.Rows {
		if row.Beside != last {
			last = row.Beside
			prio := "SCHED_FIFO"
			if !row.FloorFIFO {
				prio = "normal priority"
			}
			f := row.Floor
			fmt.Fprintf(w, "%-24s %-5s %6s %8.3f %8.3f %8.3f %8.3f %7s %6s %6s %5s %5s  (host wake-up floor: %d sleeps of %v, %s)\n",
				row.Beside, "floor", "-", f.P50Ms, f.P99Ms, f.P999Ms, f.MaxMs, "-", "-", "-", "-", "-", f.N, probeInterval, prio)
		}
		for _, p := range row.Points {
			fmt.Fprintf(w, "%-24s %-5s %6d %8.3f %8.3f %8.3f %8.3f %7d %6.2f %6.2f %5.1f %5s\n",
				row.Beside, row.Mode, p.Cells, p.Latency.P50Ms, p.Latency.P99Ms, p.Latency.P999Ms, p.Latency.MaxMs, p.DeadlineMisses, p.CPU, row.BesideCores, p.LoadAvg, r.verdict(p))
		}
	}
	for _, row := range r.Rows {
		for _, p := range row.Points {
			if r.verdict(p) != "met" && p.Tail != nil {
				fmt.Fprintf(w, "%s, mode %s, %d cells, goal missed; the slowest %.0f%% of the decisions: %v\n",
					row.Beside, row.Mode, p.Cells, 100*TailShare, p.Tail)
			}
		}
	}
	fmt.Fprintf(w, "goal: p99 <= %.3g ms and no missed decision; floor: the overshoot of a SCHED_FIFO thread's 1 ms sleeps (cyclictest's measure); "+
		"cpu: the bench process's cores (daemon, NATS, devices); job: the job beside's cores during the row; load: the 1-minute load average; "+
		"the parts: inbound = receive, wait = queue, call = model, publish, outbound = the way back to the device\n", r.GoalP99)
}

// verdict says whether a point meets the goal.
func (r *RTReport) verdict(p Point) string {
	if p.Latency.P99Ms <= r.GoalP99 && p.DeadlineMisses == 0 {
		return "met"
	}
	return "MISS"
}
