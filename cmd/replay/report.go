package main

import (
	"fmt"
	"io"
	"os"
	"rgcpred/evaluation"

	"rgcpred/bench/history"
	"rgcpred/bench/replay"
	"rgcpred/rgc"
	"rgcpred/rollout"
)

// cellScore is one cell's outcome.
type cellScore struct {
	Cell          int            `json:"cell"`
	Windows       int            `json:"windows"`
	Predicted     int            `json:"predicted_spikes"`
	Recorded      int            `json:"recorded_spikes"`
	Scores        rollout.Scores `json:"scores"`
	predicted     []float64
	recordedTrain []float64
}

// replayScores is the metric summary of a replay.
type replayScores struct {
	Cells     []cellScore     `json:"cells"`
	VanRossum rollout.Summary `json:"van_rossum"`
	Schreiber rollout.Summary `json:"schreiber"`
	Pearson   rollout.Summary `json:"pearson"`
	From      int             `json:"from"`
	To        int             `json:"to"`
	SigmaMs   float64         `json:"sigma_ms"`
	TauBins   float64         `json:"tau_bins"`
	Resamples int             `json:"resamples"`
	Seed      uint64          `json:"seed"`
}

// evaluate scores the predicted trains against the recorded ones over the
// bins the offline rollout compares ([First+1, To)) with the evaluation
// package's per-cell scores (evaluation.TrainScores) at the default 60 ms
// smoothing and its IQM bootstrap summaries of the rollout metrics.
func evaluate(rec *rgc.Recording, res *replay.Result, spikes [][]int, seed uint64) (*replayScores, error) {
	// The same smoothing and bin length as `trainer eval`.
	m, err := rollout.NewMetrics(rollout.DefaultSigmaMs, rgc.BinMs)
	if err != nil {
		return nil, err
	}
	from, to := res.First+1, res.To
	ev := &replayScores{From: from, To: to, SigmaMs: rollout.DefaultSigmaMs, TauBins: m.TauBins(),
		Resamples: rollout.DefaultResamples, Seed: seed}
	scores := make([]evaluation.CellScores, len(res.Cells))
	for i, id := range res.Cells {
		ci, _ := rec.CellIndex(id)
		pred := replay.CountVector(spikes[i], from, to)
		recd := rec.Cells[ci].Counts(from, to)
		if scores[i], err = evaluation.TrainScores(m, id, pred, recd); err != nil {
			return nil, err
		}
		s := &scores[i]
		ev.Cells = append(ev.Cells, cellScore{Cell: id, Windows: res.Windows[i], Predicted: len(spikes[i]), Recorded: int(s.RecordedSpikes),
			Scores: rollout.Scores{VanRossum: s.VanRossum, Schreiber: s.Schreiber, Pearson: s.Pearson}, predicted: pred, recordedTrain: recd})
	}
	sum, err := evaluation.SummariseMetrics(scores, evaluation.RolloutMetricNames, rollout.DefaultResamples, seed)
	if err != nil {
		return nil, err
	}
	ev.VanRossum, ev.Schreiber, ev.Pearson = sum["van_rossum"], sum["schreiber"], sum["pearson"]
	return ev, nil
}

// onTime returns each cell's predicted spikes without the late ones: the
// train a device would have emitted, dropping spikes that came too late.
func onTime(res *replay.Result) [][]int {
	out := make([][]int, len(res.Spikes))
	for i, sp := range res.Spikes {
		late := make(map[int]bool, len(res.LateBins[i]))
		for _, b := range res.LateBins[i] {
			late[b] = true
		}
		for _, b := range sp {
			if !late[b] {
				out[i] = append(out[i], b)
			}
		}
	}
	return out
}

// printReport prints the timing account and the metric table; onTime, if
// not nil, is the evaluation of the trains without late spikes.
func printReport(w io.Writer, rec *rgc.Recording, o *options, res *replay.Result, verdict *history.Report, log *history.Log,
	ev, onTime *replayScores) {
	fmt.Fprintf(w, "frames sent         %d (%d history frames at once, then %d in %.2f s)\n",
		res.Frames, res.First-res.To+int(res.Frames), res.To-res.First, res.Wall.Seconds())
	if verdict != nil {
		fmt.Fprintf(w, "decisions           %d (stale %d, skipped %d, lost %d, duplicated %d, wrong %d, other cells %d, cells missing their last decision %d)\n",
			res.Decisions, res.Stale, res.Skipped, verdict.Lost, verdict.Duplicated, verdict.Wrong, res.Foreign, res.Missing)
		fmt.Fprintf(w, "history check       %s\n", verdict)
		for _, e := range verdict.Examples {
			fmt.Fprintf(w, "                    %s\n", e)
		}
	} else {
		fmt.Fprintf(w, "decisions           %d (stale %d, skipped %d, lost at least %d in %d gaps, duplicated %d, other cells %d, "+
			"cells missing their last decision %d)\n",
			res.Decisions, res.Stale, res.Skipped, res.Lost, res.Gaps, duplicates(log), res.Foreign, res.Missing)
	}
	switch {
	case res.DaemonSkipped < 0:
		fmt.Fprintf(w, "daemon's account    unavailable (no status reply after the replay)\n")
	default:
		fmt.Fprintf(w, "daemon's account    skipped %d, rejected %d (status counters over the replay)\n",
			res.DaemonSkipped, res.DaemonRejected)
		if res.DaemonSkipped != res.Skipped {
			fmt.Fprintf(w, "WARNING             the daemon skipped %d decisions but %d skipped decisions arrived: the trains differ "+
				"from trainer eval's\n",
				res.DaemonSkipped, res.Skipped)
		}
	}
	if res.Stagger {
		fmt.Fprintf(w, "start rule          staggered (the daemon's --stagger): first windows end at %d + rollout.StartOffset(i, n); "+
			"compare with trainer eval --stagger\n", res.First)
	} else {
		fmt.Fprintf(w, "start rule          simultaneous: every first window ends at %d; compare with trainer eval (no --stagger)\n",
			res.First)
	}
	l := res.Latency
	fmt.Fprintf(w, "frame-to-decision   p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  max %.3f ms  (n %d)\n",
		l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs, l.N)
	if res.Late.Paced {
		fmt.Fprintf(w, "late spikes         %d of %d (arrived after their bin was due; p99 lateness %.3f ms)\n",
			res.Late.Late, res.Late.Spikes, res.Late.Lateness.P99Ms)
		fmt.Fprintf(w, "late decisions      %d (received after their 80-bin period ended)\n", res.LateDecisions)
		fmt.Fprintf(w, "deadline misses     %d (skipped %d + late %d)\n", res.Skipped+res.LateDecisions, res.Skipped, res.LateDecisions)
		fmt.Fprintf(w, "frame send lag      mean %.3f ms  max %.3f ms  (%d frames more than one bin late)\n",
			float64(res.Pace.MeanLag())/1e6, float64(res.Pace.MaxLag)/1e6, res.Pace.LagOver1Bin)
	} else {
		fmt.Fprintf(w, "late spikes         n/a (not paced)\n")
	}
	fmt.Fprintln(w)
	rows := []tableRow{{"replay " + o.device, ev}}
	if onTime != nil {
		rows = append(rows, tableRow{"replay " + o.device + " on time", onTime})
	}
	writeTable(w, rec.Name, o.split, rows)
	if onTime != nil {
		fmt.Fprintf(w, "\"on time\" drops the %d spikes that arrived after their bin was due, as a device would have.\n", res.Late.Late)
	}
}

// tableRow is one model row of the table.
type tableRow struct {
	name string
	ev   *replayScores
}

// writeTable prints the metric summaries as an evaluation.Table, the layout
// of `trainer eval`'s table. NLL is not an autoregressive metric (it scores
// every window of the split with the recorded history), so the replay
// leaves it out (n/a).
func writeTable(w io.Writer, recName, split string, rows []tableRow) {
	ev := rows[0].ev
	t := &evaluation.Table{Scoring: evaluation.Scoring{Recording: recName, Split: split, Bins: [2]int{ev.From, ev.To},
		SigmaMs: ev.SigmaMs, TauBins: ev.TauBins, Resamples: ev.Resamples}}
	for _, r := range rows {
		t.Rows = append(t.Rows, evaluation.Row{Name: r.name, Cells: len(r.ev.Cells), Summary: map[string]rollout.Summary{
			"van_rossum": r.ev.VanRossum, "schreiber": r.ev.Schreiber, "pearson": r.ev.Pearson}})
	}
	evaluation.WriteTable(w, t)
}

// summary is the JSON written to --out.
type summary struct {
	Recording string         `json:"recording"`
	Data      string         `json:"data"`
	Split     string         `json:"split"`
	Device    string         `json:"device"`
	Speed     float64        `json:"speed"`
	Result    *replay.Result `json:"result"`
	Metrics   *replayScores  `json:"metrics"`
	// OnTime scores the trains without late spikes (paced replays with
	// late spikes only).
	OnTime *replayScores `json:"metrics_on_time,omitempty"`
}

// writeOutputs writes the predicted and recorded trains and summary.json
// to --out.
func writeOutputs(o *options, rec *rgc.Recording, res *replay.Result, ev, onTime *replayScores) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.out, err)
	}
	pred := make([][]float64, len(ev.Cells))
	recd := make([][]float64, len(ev.Cells))
	for i, c := range ev.Cells {
		pred[i], recd[i] = c.predicted, c.recordedTrain
	}
	if err := replay.WriteTrains(o.out, res.Cells, pred, recd); err != nil {
		return err
	}
	return evaluation.WriteJSON(o.out+"/summary.json", summary{
		Recording: rec.Name, Data: o.data, Split: o.split, Device: o.device, Speed: o.speed, Result: res, Metrics: ev, OnTime: onTime,
	})
}

// duplicates counts the decisions received more than once in log (none
// without a log).
func duplicates(log *history.Log) int64 {
	if log == nil {
		return 0
	}
	return history.Duplicates(log.Received())
}
