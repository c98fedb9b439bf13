package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rgcpred/model/gpu"
)

func TestParseGPUPart(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    GPUPart
		wantErr bool
	}{
		{"parity gpt-a-cat 64", GPUPart{Kind: "parity", Config: "gpt-a-cat", Windows: 64}, false},
		{"timing gpt-b-cat tf32", GPUPart{Kind: "timing", Config: "gpt-b-cat", Precision: gpu.TF32}, false},
		{"parity gpt-a-cat 0", GPUPart{}, true},
		{"timing gpt-a-cat bf16", GPUPart{}, true},
		{"bench gpt-a-cat 1", GPUPart{}, true},
		{"parity gpt-a-cat", GPUPart{}, true},
	} {
		got, err := ParseGPUPart(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("%q written back as %q", tc.in, got.String())
		}
	}
}

// TestCrashReason: a crash's reason is its panic (with the signal), not
// the last stack frame.
func TestCrashReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"gpucheck: gpt-a-cat: 2 windows\npanic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a]\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:12 +0x1d\nexit status 2\n",
			"panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a]"},
		{"fatal error: out of memory\n\ngoroutine 1:\n\tx.go:1\n", "fatal error: out of memory"},
		{"gpucheck: cuda: no device\n", "gpucheck: cuda: no device"},
		{"", "no output"},
	} {
		if got := CrashReason(tc.in); got != tc.want {
			t.Errorf("CrashReason = %q, want %q", got, tc.want)
		}
	}
}

// TestChildRunner runs parts in child processes (shell scripts standing in
// for gpucheck --part): a result comes back, a crash is an error with its
// panic, and a child past its limit is killed: ErrPartKilled, promptly.
func TestChildRunner(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		// The part flags come last: $4 is the result's path.
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := script("ok", `[ "$1" = --x ] && [ "$2" = --part ] && [ "$3" = "parity gpt-a-cat 8" ] || exit 3
echo '{"device":"fake","parity":{"config":"gpt-a-cat","windows_asked":8}}' > "$5"`)
	crash := script("crash", `echo "panic: cuda: CUDA_ERROR_ILLEGAL_ADDRESS" >&2; echo "goroutine 1 [running]:" >&2; echo "	x.go:1" >&2; exit 2`)
	hang := script("hang", `exec sleep 30`)
	part := GPUPart{Kind: "parity", Config: "gpt-a-cat", Windows: 8}
	res, err := ChildRunner(ok, []string{"--x"})(part, 10*time.Second)
	if err != nil || res.Device != "fake" || res.Parity == nil || res.Parity.Config != "gpt-a-cat" {
		t.Fatalf("ok child: %+v, %v", res, err)
	}
	_, err = ChildRunner(crash, []string{"--x"})(part, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "crashed") || !strings.Contains(err.Error(), "panic: cuda: CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("crashing child: error %v, want its panic", err)
	}
	t0 := time.Now()
	_, err = ChildRunner(hang, []string{"--x"})(part, 300*time.Millisecond)
	if !errors.Is(err, ErrPartKilled) || time.Since(t0) > 10*time.Second {
		t.Errorf("hanging child: error %v after %v, want ErrPartKilled soon after 0.3 s", err, time.Since(t0))
	}
}

// TestGPUCheckIsolation: parts run through Run one by one, shipped
// checkpoints first; a crashed part is that part's error only, a killed
// one is listed as skipped (not measured) and absent from the results,
// and the parts after them still run.
func TestGPUCheckIsolation(t *testing.T) {
	var ran []string
	run := func(p GPUPart, limit time.Duration) (*GPUPartResult, error) {
		ran = append(ran, p.String())
		switch {
		case p.Config == "gpt-a-cat" && p.Kind == "parity":
			return nil, errors.New("crashed after 1s (exit status 2): panic: boom")
		case p.Config == "gpt-b-logmix":
			return nil, fmt.Errorf("%w (40s)", ErrPartKilled)
		case p.Kind == "parity":
			return &GPUPartResult{Device: "fake GPU", Parity: &GPUParity{Config: p.Config, Report: &gpu.LayerReport{OK: true, Windows: p.Windows}}}, nil
		}
		return &GPUPartResult{Device: "fake GPU", Timing: []GPUTiming{{Config: p.Config, Precision: string(p.Precision), Batch: 1, P50Ms: 0.2}}}, nil
	}
	rep, err := GPUCheck(GPUCheckOptions{Data: "../data/chicken-17-08-21", Models: "../models",
		Configs: []string{"gpt-b-logmix", "gpt-a-cat", "gpt-a-cat-cpu"}, Windows: 4, Timed: []string{"gpt-a-cat"}, Batches: []int{4}, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"parity gpt-a-cat 4", "parity gpt-a-cat-cpu 4", "parity gpt-b-logmix 4", "timing gpt-a-cat fp32", "timing gpt-a-cat tf32"}
	if !slices.Equal(ran, want) {
		t.Errorf("parts run %v, want %v (shipped checkpoints first)", ran, want)
	}
	if len(rep.Parity) != 2 || !strings.Contains(rep.Parity[0].Error, "panic: boom") || rep.Parity[1].Report == nil {
		t.Errorf("parity %+v: want gpt-a-cat's crash and gpt-a-cat-cpu's report", rep.Parity)
	}
	if len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "gpt-b-logmix") || !strings.Contains(rep.Skipped[0], "killed") {
		t.Errorf("skipped %v, want gpt-b-logmix killed", rep.Skipped)
	}
	if len(rep.Timing) != 2 || rep.Device != "fake GPU" && rep.NoGPU == "" {
		t.Errorf("timing %+v, device %q", rep.Timing, rep.Device)
	}
	if len(rep.Libraries) == 0 {
		t.Error("no libraries listed")
	}
}

// TestParityWindows sizes parity parts to their share of the budget.
func TestParityWindows(t *testing.T) {
	for _, tc := range []struct {
		asked       int
		cost, share time.Duration
		want        int
	}{
		{256, 10 * time.Millisecond, 60 * time.Second, 256}, // fits
		{256, 250 * time.Millisecond, 30 * time.Second, 60}, // paper CNN on few cores
		{256, 2 * time.Second, 10 * time.Second, 8},         // at least 8
		{4, 2 * time.Second, 10 * time.Second, 4},           // never more than asked
		{256, 0, 10 * time.Second, 256},                     // no estimate
	} {
		if got := parityWindows(tc.asked, tc.cost, tc.share); got != tc.want {
			t.Errorf("parityWindows(%d, %v, %v) = %d, want %d", tc.asked, tc.cost, tc.share, got, tc.want)
		}
	}
}
