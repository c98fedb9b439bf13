package gpu

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"rgcpred/base/cuda"
)

// TestKernelsCompile compiles every kernel with NVRTC for each of Archs
// and HeadDims, which needs NVRTC but no GPU (Debian: apt-get install
// libnvrtc11.2 from non-free; README). An error fails it; warnings, which
// a newer NVRTC may add, are logged.
func TestKernelsCompile(t *testing.T) {
	nv, err := cuda.LoadNVRTC("")
	if err != nil {
		t.Skipf("no NVRTC on this machine, the kernels are not compiled: %v", err)
	}
	ma, mi, err := nv.Version()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %d.%d from %s", ma, mi, nv.Path())
	for _, arch := range Archs {
		for _, hd := range HeadDims {
			t.Run(fmt.Sprintf("%s/hd%d", arch, hd), func(t *testing.T) {
				c, err := CompileKernels(nv, arch, hd)
				if err != nil {
					t.Fatal(err)
				}
				if c.Log != "" {
					t.Logf("NVRTC warns for %s (not an error):\n%s", arch, c.Log)
				}
				if !bytes.HasPrefix(c.Cubin, []byte("\x7fELF")) {
					t.Fatalf("%s: the cubin (%d bytes) is not an ELF image", arch, len(c.Cubin))
				}
				for _, k := range kernelNames() {
					if !bytes.Contains(c.Cubin, []byte(k+"\x00")) {
						t.Errorf("%s: the cubin has no kernel %s", arch, k)
					}
				}
			})
		}
	}
}

// TestHeadDimBounds: head sizes beyond what the attention kernel holds in
// registers are refused before NVRTC is asked; NVRTC itself refuses them
// too (the kernels' #error), where it is here.
func TestHeadDimBounds(t *testing.T) {
	for _, hd := range []int{0, 33, 64} {
		if _, err := CompileKernels(nil, "sm_90", hd); err == nil || !strings.Contains(err.Error(), "1..32") {
			t.Errorf("head dim %d: error %v, want one naming 1..32", hd, err)
		}
	}
	nv, err := cuda.LoadNVRTC("")
	if err != nil {
		t.Skipf("no NVRTC on this machine: %v", err)
	}
	opts := kernelOptions(64)
	if _, err := nv.Compile(kernelSource, KernelFile, "sm_80", opts...); err == nil || !strings.Contains(err.Error(), "RGC_HEAD_DIM must be 1..32") {
		t.Errorf("NVRTC with -DRGC_HEAD_DIM=64: error %v, want the kernels' #error", err)
	}
}

// TestNVRTCReportsErrors checks that a compile error comes back as an error
// carrying NVRTC's log, and a warning as a log on success.
func TestNVRTCReportsErrors(t *testing.T) {
	nv, err := cuda.LoadNVRTC("")
	if err != nil {
		t.Skipf("no NVRTC on this machine: %v", err)
	}
	for _, tc := range []struct {
		name, src string
		wantErr   bool
		wantLog   string
	}{
		{"syntax error", `extern "C" __global__ void f(float* x) { x[0] = ; }`, true, "expected an expression"},
		{"unused variable warns", `extern "C" __global__ void f(float* x) { int unused = 3; x[0] = 1.0f; }`, false, "unused"},
		{"clean", `extern "C" __global__ void f(float* x) { x[0] = 1.0f; }`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := nv.Compile(tc.src, "t.cu", "sm_80")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			got := c.Log
			if err != nil {
				got = err.Error()
			}
			if tc.wantLog == "" && got != "" || !bytes.Contains([]byte(got), []byte(tc.wantLog)) {
				t.Fatalf("log %q, want it to contain %q", got, tc.wantLog)
			}
		})
	}
}

// TestKernelSignatures checks kernelSigs, which the host side and the
// emulation pass arguments by, against kernels.cu's declarations: the same
// kernels, each parameter a pointer or an int in the same place.
func TestKernelSignatures(t *testing.T) {
	re := regexp.MustCompile(`extern "C" __global__ void (\w+)\(([^)]*)\)`)
	found := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(kernelSource, -1) {
		name := m[1]
		found[name] = true
		want, ok := kernelSigs[name]
		if !ok {
			t.Errorf("kernel %s of kernels.cu is not in kernelSigs", name)
			continue
		}
		var got []argKind
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(p)
			switch {
			case strings.Contains(p, "*"):
				got = append(got, argPtr)
			case strings.HasPrefix(p, "int "):
				got = append(got, argInt)
			default:
				t.Errorf("kernel %s: parameter %q is neither a pointer nor an int", name, p)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("kernel %s: parameters %v in kernels.cu, %v in kernelSigs", name, got, want)
		}
	}
	for name := range kernelSigs {
		if !found[name] {
			t.Errorf("kernelSigs has %s, kernels.cu does not", name)
		}
	}
}

// TestAttentionInRegisters: with the head size a compile-time constant,
// the attention kernel keeps its query and sums in registers: ptxas
// reports no stack frame for it (a run-time bound put them in 256 bytes of
// local memory). Needs NVRTC, no GPU.
func TestAttentionInRegisters(t *testing.T) {
	nv, err := cuda.LoadNVRTC("")
	if err != nil {
		t.Skipf("no NVRTC on this machine: %v", err)
	}
	re := regexp.MustCompile(`Function properties for attention\s*\n[^\n]*?(\d+) bytes stack frame`)
	for _, hd := range HeadDims {
		c, err := nv.Compile(kernelSource, KernelFile, "sm_90", append(kernelOptions(hd), "--ptxas-options=-v")...)
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindStringSubmatch(c.Log)
		if m == nil {
			t.Fatalf("head dim %d: no stack frame reported for attention in ptxas's log:\n%s", hd, c.Log)
		}
		if m[1] != "0" {
			t.Errorf("head dim %d: attention has a %s-byte stack frame (local memory)", hd, m[1])
		}
	}
}
