package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"rgcpred/base/cli"
	"rgcpred/rgc"
)

// runInspect implements `trainer inspect DIR [--json]`.
func runInspect(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer inspect DIR [--json]\n\nSummarise the recording in DIR (recording.json + .npy files).")
		fs.PrintDefaults()
	}
	// Accept flags before or after DIR.
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
		} else {
			pos = append(pos, a)
		}
	}
	if err := cli.Parse(fs, flags); err != nil {
		return err
	}
	if len(pos) != 1 {
		return cli.Usagef(fs, "want exactly one recording directory")
	}
	rec, err := rgc.Load(pos[0])
	if err != nil {
		return err
	}
	sum := rgc.Summarise(rec)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	sum.WriteText(os.Stdout)
	return nil
}
