// Command gpucheck is the device check of the GPU engine (docs/engine.md,
// "The device check"): layer-by-layer parity against the CPU on real
// windows for every configuration, and the GPU engine's batch-1 latency
// and throughput, written as JSON with the CUDA libraries used. Each part
// runs in a child process of its own (--part), so that a crash or a
// sticky CUDA error spoils that part only. tools/gpucheck/run.sh runs it
// on a GPU machine with PyTorch's reference and the latency bench;
// --libs prints the libraries alone.
//
//	gpucheck --data DIR --models DIR --json FILE [--windows 256] [--batches 64,1024,8192] [--budget 4m]
//	gpucheck --libs
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"rgcpred/base/cli"
	"rgcpred/base/cuda"
	"rgcpred/bench"
)

func run(args []string) error {
	fs := cli.NewFlagSet("gpucheck", "--json FILE [flags]",
		"Check the CUDA backend on a GPU: parity with the CPU engine per configuration, then its throughput against PyTorch's.")
	data := fs.String("data", "data/chicken-17-08-21", "recording whose test-split windows are used")
	models := fs.String("models", "models", "folder of checkpoints named CONFIG.ckpt; a configuration without one gets random weights")
	configs := fs.String("configs", "gpt-a-cat,gpt-a-logmix,gpt-b-cat,gpt-b-logmix,gpt-a-cat-cpu,gpt-a-logmix-cpu,gpt-b-cat-cpu,gpt-b-logmix-cpu", "configurations checked for parity")
	timed := fs.String("timed", "gpt-a-cat,gpt-b-cat", "configurations timed (PyTorch's reference has the paper CNN)")
	windows := fs.Int("windows", 256, "windows of the parity check at most (fewer where the budget asks)")
	batches := fs.String("batches", "64,1024,8192", "throughput batches (batch 1 is always timed)")
	each := fs.Duration("time-each", 2*time.Second, "time spent on each timed batch")
	budget := fs.Duration("budget", 4*time.Minute, "start no new part after this long")
	out := fs.String("json", "", "write the report here (required)")
	device := fs.Int("gpu", 0, "the GPU's ordinal")
	libs := fs.String("cuda-lib", "", "folders searched first for the CUDA libraries")
	listLibs := fs.Bool("libs", false, "print the CUDA libraries found (path, file, version) and the driver's, and exit")
	inProcess := fs.Bool("in-process", false, "run every part in this process (no isolation)")
	part := fs.String(strings.TrimPrefix(bench.PartFlag, "--"), "", "run this one part and write its result to --part-json (the check's child processes)")
	partJSON := fs.String(strings.TrimPrefix(bench.PartJSONFlag, "--"), "", "where --part writes its result")
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *listLibs {
		for _, l := range cuda.Libraries(*libs) {
			fmt.Println(l)
		}
		return nil
	}
	if *part == "" && *out == "" {
		return cli.Usagef(fs, "--json is required")
	}
	var bs []int
	for _, f := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("--batches: %q is not a positive batch", f)
		}
		bs = append(bs, n)
	}
	o := bench.GPUCheckOptions{Data: *data, Models: *models, Configs: split(*configs), Windows: *windows,
		Timed: split(*timed), Batches: bs, TimeEach: *each, Device: *device, LibDirs: *libs, Progress: os.Stderr}
	if *part != "" {
		p, err := bench.ParseGPUPart(*part)
		if err != nil {
			return err
		}
		if *partJSON == "" {
			return cli.Usagef(fs, "--part needs --part-json")
		}
		res, err := bench.RunGPUPart(o, p)
		if err != nil {
			return err
		}
		return bench.WritePart(*partJSON, res)
	}
	if !*inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("the child processes' executable: %w", err)
		}
		o.Run = bench.ChildRunner(exe, []string{"--data", *data, "--models", *models, "--batches", *batches,
			"--time-each", each.String(), "--gpu", strconv.Itoa(*device), "--cuda-lib", *libs})
	}
	o.Deadline = time.Now().Add(*budget)
	var werr error
	write := func(rep *bench.GPUReport) {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(*out, append(b, '\n'), 0o644)
		}
		if err != nil {
			werr = fmt.Errorf("write %s: %w", *out, err)
		}
	}
	o.Done = write
	rep, err := bench.GPUCheck(o)
	if err != nil {
		return err
	}
	write(rep)
	return werr
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func main() {
	cli.Exit("gpucheck", run(os.Args[1:]))
}
