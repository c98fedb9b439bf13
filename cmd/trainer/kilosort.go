package main

import (
	"context"
	"flag"
	"fmt"

	"rgcpred/base/cli"
	"rgcpred/rgc"
	"rgcpred/rgc/kilosort"
)

// runImportKilosort implements `trainer import-kilosort`: Kilosort/phy
// output plus a stimulus to the recording layout (docs/interop.md).
func runImportKilosort(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer import-kilosort", flag.ContinueOnError)
	var o kilosort.Options
	fs.StringVar(&o.Dir, "dir", "",
		"Kilosort/phy output directory (spike_times.npy, spike_clusters.npy, cluster_group.tsv or cluster_KSLabel.tsv, params.py)")
	fs.StringVar(&o.Triggers, "triggers", "", "frame triggers in sensor samples, .npy or .csv (frames + 1 entries, or frames)")
	fs.StringVar(&o.Pattern, "pattern", "", "LED pattern, frames x 4 of 0/1, .npy or .csv")
	out := fs.String("out", "", "recording directory to write")
	quality := fs.String("quality", "good", "quality cells: good (phy/Kilosort label), all, or comma-separated cluster ids")
	fs.BoolVar(&o.KeepNoise, "keep-noise", false, "keep clusters labelled noise")
	fs.Int64Var(&o.NumSamples, "num-samples", 0, "recording length in sensor samples (default: end of the last frame or last spike)")
	fs.StringVar(&o.Name, "name", "", "recording name (default: the directory's name)")
	fs.StringVar(&o.Species, "species", "", "species the retina came from")
	fs.StringVar(&o.Source, "source", "", "credit for the recording")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer import-kilosort --dir KS --triggers T.npy|.csv --pattern P.npy|.csv --out DIR\n"+
			"                               [--quality good|all|IDS]\n"+
			"\n"+
			"Convert Kilosort/phy output and a stimulus into the recording layout (docs/data.md).")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if o.Dir == "" || o.Triggers == "" || o.Pattern == "" || *out == "" {
		return cli.Usagef(fs, "--dir, --triggers, --pattern and --out are required")
	}
	switch *quality {
	case "good":
	case "all":
		o.Quality.All = true
	default:
		ids, err := cli.Ints(*quality)
		if err != nil {
			return fmt.Errorf("--quality: want good, all or cluster ids: %w", err)
		}
		o.Quality.IDs = ids
	}
	raw, rep, err := kilosort.Convert(o)
	if err != nil {
		return err
	}
	if err := raw.Write(*out); err != nil {
		return err
	}
	labels := rep.Labels
	if labels == "" {
		labels = "no label file"
	}
	fmt.Printf("wrote %s: %d of %d clusters (%d quality, %d noise dropped; labels from %s), %d spikes, %d frames, %.1f s at %g Hz\n",
		*out, rep.Kept, rep.Clusters, rep.Quality, rep.DroppedNoise, labels, rep.Spikes, rep.Frames,
		float64(raw.NumSamples)/raw.SampleRateHz, raw.SampleRateHz)
	if rep.LastFrameEstimated {
		fmt.Println("note: the triggers had no end entry; the last frame was given the median frame length")
	}
	if raw.SampleRateHz != rgc.SensorRateHz {
		fmt.Printf("note: bins are %d samples, so this recording's bin rate is %.2f Hz, not the shipped models' %.2f Hz\n",
			rgc.Decimation, raw.SampleRateHz/rgc.Decimation, rgc.BinRateHz)
	}
	return nil
}
