package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// PartFlags are the flags of a child run of one part: gpucheck --part
// PART --part-json FILE (ChildRunner).
const (
	PartFlag     = "--part"
	PartJSONFlag = "--part-json"
)

// ChildRunner returns a GPUCheckOptions.Run that runs each part in a new
// process, exe with args and the part flags, so that a sticky CUDA error
// (which spoils a process's context for good) or a crash stops that part
// only. A child past its limit is killed: ErrPartKilled. A child that
// exits without its result is an error carrying its panic (CrashReason).
func ChildRunner(exe string, args []string) func(GPUPart, time.Duration) (*GPUPartResult, error) {
	return func(p GPUPart, limit time.Duration) (*GPUPartResult, error) {
		dir, err := os.MkdirTemp("", "gpucheck-part")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "part.json")
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe, append(append([]string{}, args...), PartFlag, p.String(), PartJSONFlag, out)...)
		cmd.WaitDelay = 5 * time.Second // a child stuck in the driver after the kill
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		err = cmd.Run()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", ErrPartKilled, limit.Round(time.Second))
		}
		raw, rerr := os.ReadFile(out)
		if err != nil || rerr != nil {
			if err == nil {
				err = rerr
			}
			return nil, fmt.Errorf("crashed after %v (%v): %s", time.Since(t0).Round(time.Millisecond), err, CrashReason(stderr.String()))
		}
		var res GPUPartResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("part result %s: %w", p, err)
		}
		return &res, nil
	}
}

// WritePart writes a part's result for the parent (ChildRunner).
func WritePart(path string, res *GPUPartResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// CrashReason is the line of a Go program's error output that says why it
// died: the panic or fatal error (with the signal line after it), else
// the last line.
func CrashReason(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "[signal ") {
				return l + " " + lines[i+1]
			}
			return l
		}
	}
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return last
	}
	return "no output"
}
