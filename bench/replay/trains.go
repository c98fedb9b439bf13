package replay

import (
	"fmt"
	"os"
	"path/filepath"

	"rgcpred/rgc"
)

// CountVector returns the count vector over bins [from, to) of a train given
// by its spike bins (bins outside the range are ignored).
func CountVector(spikeBins []int, from, to int) []float64 {
	if to < from {
		to = from
	}
	out := make([]float64, to-from)
	for _, b := range spikeBins {
		if b >= from && b < to {
			out[b-from]++
		}
	}
	return out
}

// WriteCountsNPY writes a count vector as a one-dimensional int8 .npy file
// (the form `trainer metrics` reads). Counts above 127 in one bin are an
// error.
func WriteCountsNPY(path string, counts []float64) error {
	v := make([]int8, len(counts))
	for i, c := range counts {
		if c < 0 || c > 127 || c != float64(int8(c)) {
			return fmt.Errorf("write %s: bin %d holds count %v, not an integer in 0..127", path, i, c)
		}
		v[i] = int8(c)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := rgc.WriteNPY(f, v, nil); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// TrainFileName is the file name of a cell's count vector in an output
// directory's predicted/ and recorded/ folders.
func TrainFileName(cluster int) string { return fmt.Sprintf("cell_%d.npy", cluster) }

// WriteTrains writes, for each cell, the predicted and the recorded count
// vectors over the same bins to dir/predicted/cell_<id>.npy and
// dir/recorded/cell_<id>.npy. predicted and recorded are indexed like
// clusters.
func WriteTrains(dir string, clusters []int, predicted, recorded [][]float64) error {
	if len(predicted) != len(clusters) || len(recorded) != len(clusters) {
		return fmt.Errorf("write trains: %d cells, %d predicted and %d recorded trains", len(clusters), len(predicted), len(recorded))
	}
	for _, sub := range []string{"predicted", "recorded"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("write trains: %w", err)
		}
	}
	for i, id := range clusters {
		if len(predicted[i]) != len(recorded[i]) {
			return fmt.Errorf("write trains: cell %d: predicted train has %d bins, recorded %d", id, len(predicted[i]), len(recorded[i]))
		}
		if err := WriteCountsNPY(filepath.Join(dir, "predicted", TrainFileName(id)), predicted[i]); err != nil {
			return err
		}
		if err := WriteCountsNPY(filepath.Join(dir, "recorded", TrainFileName(id)), recorded[i]); err != nil {
			return err
		}
	}
	return nil
}
