package gpu

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"rgcpred/base/cuda"
)

// TestKernelsCompile compiles every kernel with NVRTC for each of Archs,
// which needs NVRTC but no GPU (Debian: apt-get install libnvrtc11.2 from
// non-free; README), and fails on any error or warning.
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
		t.Run(arch, func(t *testing.T) {
			c, err := CompileKernels(nv, arch)
			if err != nil {
				t.Fatal(err)
			}
			if c.Log != "" {
				t.Fatalf("NVRTC warns for %s:\n%s", arch, c.Log)
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
