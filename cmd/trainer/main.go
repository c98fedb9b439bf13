// Command trainer trains and evaluates the spike-prediction models on MEA
// recordings: inspect a recording, synthesise one, train, evaluate.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"rgcpred/base/cli"
)

// command is one trainer subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands lists the subcommands by name.
func commands() map[string]command {
	return map[string]command{
		"inspect":       {"summarise a recording", runInspect},
		"eval":          {"roll models out on a split and score them (NLL, Van Rossum, Schreiber, Pearson)", runEval},
		"metrics":       {"spike-train metrics between two .npy count vectors", runMetrics},
		"train":         {"train a model (AdamW, one-cycle, early stopping, resumable)", runTrain},
		"lr-find":       {"learning-rate range test: loss against rate, proposed rate", runLRFind},
		"model":         {"print a configuration's parameter counts", runModel},
		"synth":         {"simulate a recording with an exact oracle (GLM cells, four-LED noise)", runSynth},
		"glm":           {"fit the classical GLM baseline (stimulus + history filters) and score it exactly", runGLM},
		"bench":         {"time training steps of ours and the PyTorch reference, alternating, and print the ratio", runBench},
		"fit-threshold": {"fit the threshold spike policy: per-cell thresholds matching the recorded rate", runFitThreshold},
		"compare":       {"paired comparison of models scored in separate eval --json runs (e.g. each with its own thresholds; seeds)", runCompare},
		"soup":          {"average the weights of checkpoints fine-tuned from one parent (a model soup)", runSoup},
		"cut":           {"keep some of a checkpoint's cells (e.g. train on all clusters, serve the quality cells)", runCut},
		"experiment":    {"train a grid of configurations x seeds at a matched budget, evaluate, compare, plot", runExperiment},

		// Interchange with other tools (docs/interop.md).
		"export":          {"write a checkpoint as safetensors in PyTorch's layout", runExport},
		"import":          {"read a PyTorch safetensors state_dict into a checkpoint", runImport},
		"import-kilosort": {"convert Kilosort/phy output plus a stimulus into a recording", runImportKilosort},
	}
}

// usage writes the command list to w, its name column as wide as the
// longest name.
func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: trainer COMMAND [flags] [args]\n\nTrain, evaluate and compare spike-prediction models on MEA recordings.\n\ncommands:")
	names := make([]string, 0, len(cmds))
	width := 0
	for n := range cmds {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'trainer COMMAND -h' for a command's flags.")
}

// run runs the subcommand named by args[0] with the rest of args.
func run(ctx context.Context, args []string) error {
	cmds := commands()
	if len(args) < 1 || cli.IsHelp(args[0]) || args[0] == "help" {
		if len(args) < 1 {
			return &cli.UsageError{Cmd: "trainer", Err: errors.New("no command")}
		}
		usage(cli.Stdout, cmds)
		return flag.ErrHelp
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return &cli.UsageError{Cmd: "trainer", Err: fmt.Errorf("unknown command %q", args[0])}
	}
	return cli.Prefix(args[0], cmd.run(ctx, args[1:]))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli.Exit("trainer", run(ctx, os.Args[1:]))
}
