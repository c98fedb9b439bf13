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

// selectCells resolves a --cells value: "quality" (the quality-filtered
// cells) or "all", as indices into rec.Cells.
func selectCells(rec *rgc.Recording, sel string) ([]int, error) {
	return experiment.SelectCells(rec, sel)
}
