package main

import (
	"flag"
	"fmt"

	"rgcpred/experiment"
	"rgcpred/rgc"
)

// parseNoArgs parses args into fs and rejects positional arguments.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// loadCells loads the recording in dir and resolves a --cells value
// ("quality" or "all") to indices into its Cells; no cell is an error.
func loadCells(dir, sel string) (*rgc.Recording, []int, error) {
	rec, err := rgc.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	cells, err := experiment.SelectCells(rec, sel)
	if err != nil {
		return nil, nil, err
	}
	if len(cells) == 0 {
		return nil, nil, fmt.Errorf("recording %s has no %s cells", dir, sel)
	}
	return rec, cells, nil
}
