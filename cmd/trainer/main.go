// Command trainer trains and evaluates the spike-prediction models on MEA
// recordings: inspect a recording, synthesise one, train, evaluate.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one trainer subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands lists the subcommands; each lives in its own file.
func commands() map[string]command {
	return map[string]command{
		// Add one line per subcommand, e.g.
		// "inspect": {"summarise a recording", runInspect},
		"inspect":       {"summarise a recording", runInspect},
		"eval":          {"roll models out on a split and score them (NLL, Van Rossum, Schreiber, Pearson)", runEval},
		"metrics":       {"spike-train metrics between two .npy count vectors", runMetrics},
		"train":         {"train a model (AdamW, one-cycle, early stopping, resumable)", runTrain},
		"lr-find":       {"learning-rate range test: loss against rate, proposed rate", runLRFind},
		"model":         {"print a configuration's parameter counts", runModel},
		"synth":         {"simulate a recording with an exact oracle (GLM cells, four-LED noise)", runSynth},
		"glm":           {"fit the classical GLM baseline (stimulus + history filters) and score it exactly", runGLM},
		"fit-threshold": {"fit the threshold spike policy: per-cell thresholds that match the recorded rate on the training split", runFitThreshold},
		"experiment":    {"train a grid of configurations x seeds at a matched budget, evaluate, compare, plot (resumable)", runExperiment},

		// Interchange with other tools (docs/interop.md).
		"export":          {"write a checkpoint as safetensors in PyTorch's layout", runExport},
		"import":          {"read a PyTorch safetensors state_dict into a checkpoint", runImport},
		"import-kilosort": {"convert Kilosort/phy output plus a stimulus into a recording", runImportKilosort},
	}
}

func usage(cmds map[string]command) {
	fmt.Fprintln(os.Stderr, "usage: trainer COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'trainer COMMAND -h' for a command's flags.")
}

func main() {
	cmds := commands()
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(cmds)
		os.Exit(2)
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "trainer: unknown command %q\n\n", os.Args[1])
		usage(cmds)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "trainer %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
