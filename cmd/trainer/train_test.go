package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/model"
)

func TestModelCommand(t *testing.T) {
	if err := runModel(context.Background(), []string{"--config", "gpt-b-logmix-cpu"}); err != nil {
		t.Fatal(err)
	}
	if err := runModel(context.Background(), []string{"--config", "gpt-z-cat"}); err == nil {
		t.Error("unknown stem accepted")
	}
	c, err := model.ParseConfigName("gpt-a-cat", 60)
	if err != nil {
		t.Fatal(err)
	}
	// The spec's sizes: CNN ~0.55-0.6 M, gpt-a ~0.1 M parameters.
	if n := c.CountParams("cnn."); n < 540_000 || n > 600_000 {
		t.Errorf("paper CNN has %d parameters", n)
	}
	if n := c.CountParams("gpt."); n < 90_000 || n > 120_000 {
		t.Errorf("gpt-a has %d parameters", n)
	}
}

func TestTrainCommandErrors(t *testing.T) {
	data := filepath.Join("..", "..", "data", "chicken-17-08-21")
	out := filepath.Join(t.TempDir(), "m.ckpt")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", data, "--cells", "some", "--out", out}, "--cells"},
		{[]string{"--data", data, "--config", "gpt-a-dog", "--out", out}, "head"},
		{[]string{"--data", filepath.Join(t.TempDir(), "missing"), "--out", out}, "missing"},
		{[]string{"--data", data, "--lr", "0", "--out", out}, "learning rate"},
		{[]string{"--data", data, "--cells", "all", "--teacher", filepath.Join("..", "..", "models", "glm-chicken-17-08-21.json"), "--out", out}, "has no model of cell"},
		{[]string{"--data", data, "--teacher", filepath.Join(t.TempDir(), "nope.json"), "--out", out}, "nope.json"},
		{[]string{"--data", data, "--config", "gpt-a-logmix-cpu", "--teacher", filepath.Join("..", "..", "models", "glm-chicken-17-08-21.json"), "--out", out}, "cat head"},
		{[]string{"--data", data, "--init", filepath.Join(t.TempDir(), "nope.ckpt"), "--out", out}, "nope.ckpt"},
		{[]string{"--data", data, "--cells", "all", "--teacher", "ckpt:" + shippedModel, "--out", out}, "does not know cells"},
		{[]string{"--data", data, "--teacher", "ckpt:" + shippedModel + "," + shippedModel, "--out", out}, "2 repeats"},
		{[]string{"--data", data, "--teacher", "mix:ckpt:" + shippedModel, "--out", out}, "at least two members"},
		{[]string{"--data", data, "--stim", "zero-phase", "--teacher", "ckpt:" + shippedModel, "--out", out}, "zero-phase"},
		{[]string{"--data", data, "--precision", "fp16", "--out", out}, `unknown precision "fp16"`},
		{[]string{"--data", data, "--ema", "1", "--out", out}, "EMA decay 1 must be within (0, 1)"},
		{[]string{"--data", data, "--ema", "-0.5", "--out", out}, "EMA decay -0.5 must be within (0, 1)"},
		{[]string{"--data", data, "--ema", "1.5", "--out", out}, "EMA decay 1.5 must be within (0, 1)"},
		{[]string{"--data", data, "--ema", "NaN", "--out", out}, "EMA decay NaN must be within (0, 1)"},
		{[]string{"--data", data, "--ema", "high", "--out", out}, `EMA decay "high" is not a number`},
	} {
		err := runTrain(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed run wrote a checkpoint")
	}
}

// TestTrainMixtureTeacher distils a few steps from a mixture of the shipped
// checkpoint and the GLM: the teacher spec is parsed, both members load on
// the training cells, and the run writes a checkpoint.
func TestTrainMixtureTeacher(t *testing.T) {
	data := filepath.Join("..", "..", "data", "chicken-17-08-21")
	out := filepath.Join(t.TempDir(), "m.ckpt")
	teacher := "mix:0.65*ckpt:" + shippedModel + "+0.35*glm:" + filepath.Join("..", "..", "models", "glm-chicken-17-08-21.json")
	_, err := captureStdout(t, func() error {
		return runTrain(context.Background(), []string{"--data", data, "--teacher", teacher, "--batch", "8", "--steps", "2",
			"--val-every", "2", "--val-windows", "16", "--threads", "1", "--out", out})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.LoadCheckpoint(out); err != nil {
		t.Fatal(err)
	}
}

// TestTrainEMA trains a few steps with --ema: the best checkpoint records
// the decay, and resuming the run with another decay is refused.
func TestTrainEMA(t *testing.T) {
	data := filepath.Join("..", "..", "data", "chicken-17-08-21")
	out := filepath.Join(t.TempDir(), "m.ckpt")
	args := []string{"--data", data, "--config", "gpt-a-cat-cpu", "--batch", "8", "--steps", "2", "--val-every", "2",
		"--val-windows", "16", "--threads", "1", "--out", out}
	if _, err := captureStdout(t, func() error { return runTrain(context.Background(), append(args, "--ema", "0.99")) }); err != nil {
		t.Fatal(err)
	}
	ck, err := model.LoadCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Provenance.EMA != 0.99 {
		t.Errorf("checkpoint records EMA %v, want 0.99", ck.Provenance.EMA)
	}
	_, err = captureStdout(t, func() error {
		return runTrain(context.Background(), []string{"--data", data, "--resume", out + ".resume", "--ema", "0.999"})
	})
	if err == nil || !strings.Contains(err.Error(), "averages the weights with decay 0.99, not 0.999") {
		t.Errorf("resume with another decay: error %v, want a refusal naming both decays", err)
	}
}

// TestTrainInitTakesConfig: a warm restart without --config trains the
// architecture of its --init checkpoint (not the flag's default), and a
// --config that names another is refused, naming both.
func TestTrainInitTakesConfig(t *testing.T) {
	data := filepath.Join("..", "..", "data", "chicken-17-08-21")
	init, err := model.LoadCheckpoint(shippedModel)
	if err != nil {
		t.Fatal(err)
	}
	want := init.Weights.Config.Name()
	out := filepath.Join(t.TempDir(), "m.ckpt")
	args := []string{"--data", data, "--init", shippedModel, "--batch", "8", "--steps", "2", "--val-every", "2",
		"--val-windows", "16", "--threads", "1", "--out", out}
	if got := trainedConfig(t, args, out); got != want {
		t.Errorf("warm restart trained %s, want its init's %s", got, want)
	}
	other := "gpt-b-cat-cpu"
	if want == other {
		other = "gpt-a-cat-cpu"
	}
	err = runTrain(context.Background(), append(args, "--config", other))
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), other) {
		t.Errorf("--init %s with --config %s: error %v, want one naming both", want, other, err)
	}
}

// trainedConfig runs train with args and returns the configuration name of
// the checkpoint it wrote to out.
func trainedConfig(t *testing.T, args []string, out string) string {
	t.Helper()
	if _, err := captureStdout(t, func() error { return runTrain(context.Background(), args) }); err != nil {
		t.Fatal(err)
	}
	ck, err := model.LoadCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	return ck.Weights.Config.Name()
}

// TestTrainDefaultsToShipped: train without --config trains the
// architecture of the shipped model (what predictord serves by default),
// and so does model.
func TestTrainDefaultsToShipped(t *testing.T) {
	data := filepath.Join("..", "..", "data", "chicken-17-08-21")
	shipped, err := model.LoadCheckpoint(shippedModel)
	if err != nil {
		t.Fatal(err)
	}
	want := shipped.Weights.Config.Name()
	out := filepath.Join(t.TempDir(), "m.ckpt")
	args := []string{"--data", data, "--batch", "8", "--steps", "2", "--val-every", "2", "--val-windows", "16", "--threads", "1", "--out", out}
	if got := trainedConfig(t, args, out); got != want {
		t.Errorf("train without --config trained %s, want the shipped %s", got, want)
	}
	printed, err := captureStdout(t, func() error { return runModel(context.Background(), nil) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(printed, want+" ") {
		t.Errorf("model without --config printed %q, want the shipped %s", printed, want)
	}
}
