package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// ManifestVersion is the version of the manifest format.
const ManifestVersion = 1

// ManifestFile is the manifest's name inside the experiment directory.
const ManifestFile = "manifest.json"

// Run statuses.
const (
	// StatusPending: not started.
	StatusPending = "pending"
	// StatusTraining: started; it continues from its last segment
	// boundary (BoundaryStep, 0 for the start).
	StatusTraining = "training"
	// StatusTrained: finished training; its best checkpoint is final.
	StatusTrained = "trained"
)

// Manifest is an experiment directory's record: what it trains, how it is
// evaluated, and where every run stands.
type Manifest struct {
	// Version is the format's version, ManifestVersion.
	Version int `json:"version"`
	// Command is the command line that created the experiment and
	// LastCommand the latest one that ran it.
	Command     []string `json:"command"`
	LastCommand []string `json:"last_command"`
	// Created and Updated are RFC 3339 times.
	Created string `json:"created"`
	Updated string `json:"updated"`
	// Plan is the training plan; Recording identifies the recording it
	// was made for and CellIDs its cells (cluster ids, embedding order).
	Plan      Plan        `json:"plan"`
	Recording RecordingID `json:"recording"`
	CellIDs   []int       `json:"cell_ids"`
	// Eval is the latest evaluation settings.
	Eval EvalSettings `json:"eval"`
	// Runs holds every run ever planned, by name.
	Runs []*RunState `json:"runs"`
}

// RunState is one run's status in the manifest.
type RunState struct {
	// Name is the run's name and directory under runs/; Config and Seed
	// its configuration and training seed.
	Name   string `json:"name"`
	Config string `json:"config"`
	Seed   uint64 `json:"seed"`
	// Status is StatusPending, StatusTraining or StatusTrained.
	Status string `json:"status"`
	// BoundaryStep is the step of the last saved segment boundary, where
	// the run continues (0: from the start).
	BoundaryStep int `json:"boundary_step"`
	// Steps is the number of optimiser steps taken (a finished run),
	// BestStep and BestVal the step and validation NLL of its best
	// checkpoint; Stopped is set when early stopping ended it.
	Steps    int     `json:"steps,omitempty"`
	BestStep int     `json:"best_step,omitempty"`
	BestVal  float64 `json:"best_val,omitempty"`
	Stopped  bool    `json:"stopped,omitempty"`
	// Samples is the number of training windows seen (Steps x batch).
	Samples int64 `json:"samples,omitempty"`
	// TrainSeconds is the training time of the run's path (train.Result's
	// Elapsed); WallSeconds all the wall-clock time spent training it,
	// restarts and repeated segments included.
	TrainSeconds float64 `json:"train_seconds,omitempty"`
	WallSeconds  float64 `json:"wall_seconds,omitempty"`
	// Evaluations lists the cached evaluation files (relative to the run
	// directory).
	Evaluations []string `json:"evaluations,omitempty"`
}

// LoadManifest reads the manifest of the experiment directory dir.
func LoadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("experiment manifest %s: %w", path, err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("experiment manifest %s: version %d, want %d", path, m.Version, ManifestVersion)
	}
	return &m, nil
}

// HasManifest reports whether dir holds an experiment manifest.
func HasManifest(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, ManifestFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("experiment manifest: %w", err)
}

// save writes the manifest to dir atomically.
func (m *Manifest) save(dir string) error {
	m.Updated = time.Now().UTC().Format(time.RFC3339)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, ManifestFile), append(data, '\n'))
}

// run returns the run of a configuration and seed, adding a pending one
// if the manifest lacks it.
func (m *Manifest) run(config string, seed uint64) *RunState {
	name := runName(config, seed)
	for _, r := range m.Runs {
		if r.Name == name {
			return r
		}
	}
	r := &RunState{Name: name, Config: config, Seed: seed, Status: StatusPending}
	m.Runs = append(m.Runs, r)
	return r
}

// writeFileAtomic writes data to path through a synced temporary file and
// a rename, so a reader (or a restart after a crash) sees the old content
// or the new, never a mix.
func writeFileAtomic(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// copyFileAtomic copies src to dst with writeFileAtomic.
func copyFileAtomic(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	return writeFileAtomic(dst, data)
}
