package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestKernelSourceOnCPU runs each configuration's plan with the kernels'
// own CUDA C source compiled for the CPU by g++ (testdata/cpucuda.h: a
// thread per CUDA thread of a block or warp where a kernel synchronises;
// the undefined-behaviour sanitizer on), GEMMs as float64 sums, and compares
// every activation with the Go emulation (emulate.go) and the head outputs
// with the CPU engine, within ParityTol: what the kernels compute, not only
// their Go mirror, is checked without a GPU. What remains for a device is
// its float arithmetic (fused multiply-adds, expf and tanhf to a few ulp)
// and the CUDA calls. Skips, saying so, without g++.
func TestKernelSourceOnCPU(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skipf("no g++ here to compile the kernels for the CPU: %v", err)
	}
	dir := t.TempDir()
	if err := writeCPUSources(dir); err != nil {
		t.Fatal(err)
	}
	// One driver per head size, as NVRTC compiles one module per head
	// size; compiled side by side.
	bins := map[int]string{}
	errs := make([]error, len(HeadDims))
	var wg sync.WaitGroup
	for i, hd := range HeadDims {
		bins[hd] = filepath.Join(dir, fmt.Sprintf("driver%d", hd))
		args := append([]string{"-std=c++20", "-O1", "-pthread", "-fsanitize=undefined", "-fno-sanitize-recover=all",
			"-I", dir, "-I", "testdata", "-o", bins[hd], "testdata/driver.cpp"}, kernelOptions(hd)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := exec.Command(gxx, args...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("g++ for head size %d: %v\n%s", hd, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Four configurations take every kernel through each of its variants:
	// paper and cpu CNN widths, the projection and 32-wide heads of gpt-b,
	// both heads.
	for i, name := range []string{"gpt-a-cat", "gpt-b-logmix", "gpt-a-logmix-cpu", "gpt-b-cat-cpu"} {
		t.Run(name, func(t *testing.T) {
			e := cpuEngine(t, name, uint64(i+1))
			n := newNet(e.Prepared(), 4)
			const nb = 2
			b := e.ProbeWindows(nb, uint64(20+i))
			host := make([]float32, n.hostLen())
			if err := n.stage(host, b, 0, nb, rowsOf(testCells)); err != nil {
				t.Fatal(err)
			}
			ops := n.plan(nb)
			emu := n.emulatePlan(ops, host, nil)
			acts := make([]float32, n.lay.total)
			copy(acts, host)
			in, out := filepath.Join(dir, name+".in"), filepath.Join(dir, name+".out")
			if err := writePlan(in, n.w.data, acts, ops); err != nil {
				t.Fatal(err)
			}
			if o, err := exec.Command(bins[e.Prepared().Config.HeadDim], in, out).CombinedOutput(); err != nil {
				t.Fatalf("the kernels on the CPU: %v\n%s", err, o)
			}
			raw, err := os.ReadFile(out)
			if err != nil || len(raw) != 4*len(acts) {
				t.Fatalf("read %s: %v (%d bytes, want %d)", out, err, len(raw), 4*len(acts))
			}
			for j := range acts {
				acts[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
			}
			for _, bf := range n.lay.bufs {
				r := bf.ref(nb)
				if d := maxRelDiff(acts[r.Off:r.Off+r.Len], emu[r.Off:r.Off+r.Len]); d > ParityTol {
					t.Errorf("%s: the kernels' source and the Go emulation differ by %.3g", bf.name, d)
				}
			}
			want := make([]float32, nb*n.headOut)
			if err := e.Logits(b, want); err != nil {
				t.Fatal(err)
			}
			got := acts[n.logits.off : n.logits.off+nb*n.headOut]
			d := maxRelDiff(got, want)
			if d > ParityTol {
				t.Errorf("head outputs differ from the CPU engine's by %.3g", d)
			}
			t.Logf("head outputs within %.2g of the CPU engine's", d)
		})
	}
}

// writeCPUSources writes kernels_cpu.cu (kernels.cu with its dynamic
// shared memory taken from the shim) and dispatch.inc (a case per kernel,
// numbered as kernelNames, calling it with its parameters' types) to dir.
func writeCPUSources(dir string) error {
	src := regexp.MustCompile(`extern __shared__ float (\w+)\[\];`).ReplaceAllString(kernelSource, "float* $1 = cc_shared;")
	if err := os.WriteFile(filepath.Join(dir, "kernels_cpu.cu"), []byte(src), 0o644); err != nil {
		return err
	}
	sig := regexp.MustCompile(`extern "C" __global__ void (\w+)\(([^)]*)\)`)
	ms := sig.FindAllStringSubmatchIndex(kernelSource, -1)
	bodies := map[string]string{}
	params := map[string][]string{}
	for k, m := range ms {
		name := kernelSource[m[2]:m[3]]
		end := len(kernelSource)
		if k+1 < len(ms) {
			end = ms[k+1][0]
		}
		bodies[name] = kernelSource[m[1]:end]
		params[name] = strings.Split(kernelSource[m[4]:m[5]], ",")
	}
	var inc strings.Builder
	for k, name := range kernelNames() {
		ps, ok := params[name]
		if !ok {
			return fmt.Errorf("kernel %s not in kernels.cu", name)
		}
		var call []string
		for i, p := range ps {
			p = strings.TrimSpace(p)
			typ := strings.TrimSpace(p[:strings.LastIndexAny(p, " *")+1])
			if strings.Contains(typ, "*") {
				call = append(call, fmt.Sprintf("(%s)P(op, %d)", typ, i))
			} else {
				call = append(call, fmt.Sprintf("I(op, %d)", i))
			}
		}
		mode := "cc_serial"
		switch {
		case strings.Contains(bodies[name], "__syncthreads"):
			mode = "cc_blocks_run"
		case strings.Contains(bodies[name], "__shfl"):
			mode = "cc_warps_run"
		}
		fmt.Fprintf(&inc, "case %d: cc_launch(grid, block, (int)op.shared, %s, [&] { %s(%s); }); break;\n",
			k, mode, name, strings.Join(call, ", "))
	}
	return os.WriteFile(filepath.Join(dir, "dispatch.inc"), []byte(inc.String()), 0o644)
}

// writePlan writes the driver's input: the weights, the activations and
// the operations (driver.cpp reads them).
func writePlan(path string, weights, acts []float32, ops []Op) error {
	var b []byte
	i64 := func(v int) { b = binary.LittleEndian.AppendUint64(b, uint64(int64(v))) }
	for _, a := range [][]float32{weights, acts} {
		i64(len(a))
		for _, v := range a {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	index := map[string]int{}
	for k, name := range kernelNames() {
		index[name] = k
	}
	i64(len(ops))
	for _, op := range ops {
		if g := op.Gemm; g != nil {
			i64(0)
			for _, v := range []int{g.M, g.N, g.K, g.A.Arena, g.A.Off, g.Lda, g.W.Arena, g.W.Off, g.Ldw, g.C.Arena, g.C.Off, g.Ldc} {
				i64(v)
			}
			continue
		}
		i64(1)
		for _, v := range []int{index[op.Kernel], op.Grid.X, op.Grid.Y, op.Block.X, op.Shared, len(op.Args)} {
			i64(v)
		}
		for _, a := range op.Args {
			switch {
			case a.Ref != nil:
				i64(0)
				i64(a.Ref.Arena)
				i64(a.Ref.Off)
				i64(0)
			case a.Null:
				i64(1)
				i64(0)
				i64(0)
				i64(0)
			default:
				i64(2)
				i64(0)
				i64(0)
				i64(a.Int)
			}
		}
	}
	return os.WriteFile(path, b, 0o644)
}
