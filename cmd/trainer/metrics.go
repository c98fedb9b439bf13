package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"

	"rgcpred/base/cli"
	"rgcpred/rgc"
	"rgcpred/rollout"
)

// runMetrics implements `trainer metrics`.
func runMetrics(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer metrics", flag.ContinueOnError)
	a := fs.String("a", "", "first spike train: .npy count vector (int or float)")
	b := fs.String("b", "", "second spike train: .npy count vector of the same length")
	binMs := fs.Float64("bin-ms", rollout.DefaultBinMs, "bin length, ms")
	sigmaMs := fs.Float64("sigma-ms", rollout.DefaultSigmaMs, "smoothing time scale, ms")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer metrics --a A.npy --b B.npy [--bin-ms 1.0082] [--sigma-ms 60] [--json]\n\nVan Rossum distance, Schreiber similarity and smoothed Pearson correlation\nbetween two spike trains.")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *a == "" || *b == "" {
		return cli.Usagef(fs, "--a and --b are required")
	}
	m, err := rollout.NewMetrics(*sigmaMs, *binMs)
	if err != nil {
		return err
	}
	x, err := readTrain(*a)
	if err != nil {
		return err
	}
	y, err := readTrain(*b)
	if err != nil {
		return err
	}
	if len(x) != len(y) {
		return fmt.Errorf("spike trains differ in length: %s has %d bins, %s has %d", *a, len(x), *b, len(y))
	}
	s, err := m.Compare(x, y)
	if err != nil {
		return fmt.Errorf("%s vs %s: %w", *a, *b, err)
	}
	if *asJSON {
		data, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Println(string(data))
		return nil
	}
	fmt.Printf("van_rossum %.10g\nschreiber  %.10g\npearson    %.10g\n", s.VanRossum, s.Schreiber, s.Pearson)
	return nil
}

// readTrain reads a spike train from a .npy file: a count vector, i.e. an
// array with at most one dimension longer than 1.
func readTrain(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spike train: %w", err)
	}
	defer f.Close()
	arr, err := rgc.ReadNPY(f)
	if err != nil {
		return nil, fmt.Errorf("read spike train %s: %w", path, err)
	}
	long := 0
	for _, d := range arr.Shape {
		if d > 1 {
			long++
		}
	}
	if long > 1 {
		return nil, fmt.Errorf("read spike train %s: shape %v, want a 1-D count vector", path, arr.Shape)
	}
	x, err := arr.Float64s()
	if err != nil {
		return nil, fmt.Errorf("read spike train %s: %w", path, err)
	}
	if len(x) == 0 {
		return nil, fmt.Errorf("read spike train %s: no bins", path)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("read spike train %s: bin %d is %v", path, i, v)
		}
	}
	return x, nil
}
