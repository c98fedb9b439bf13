package cuda

import (
	"testing"
	"unsafe"
)

// TestDevice exercises the driver bindings on a GPU: memory, copies, a
// kernel compiled by NVRTC, a CUDA graph and a cuBLAS GEMM. It skips,
// saying why, where there is no driver, GPU or NVRTC.
func TestDevice(t *testing.T) {
	d, err := Open(0, "")
	if err != nil {
		t.Skipf("no GPU here: %v", err)
	}
	defer d.Close()
	nv, err := LoadNVRTC("")
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	c, err := nv.Compile(`extern "C" __global__ void axpb(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 2.0f * x[i] + 1.0f; }`, "t.cu", d.Arch())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, %s, %d SMs, driver %d", d.Name, d.Arch(), d.SMs, d.DriverVersion)
	const n = 1000
	err = d.Do(func() error {
		mod, err := d.LoadModule(c.Cubin)
		if err != nil {
			return err
		}
		defer d.UnloadModule(mod)
		f, err := d.Function(mod, "axpb")
		if err != nil {
			return err
		}
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		defer d.DestroyStream(s)
		p, err := d.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer d.Free(p)
		h, err := d.HostAlloc(n)
		if err != nil {
			return err
		}
		defer d.HostFree(h)
		for i := range h {
			h[i] = float32(i)
		}
		a := NewArgs(2)
		a.SetPtr(0, p)
		a.SetInt(1, n)
		g, err := d.Capture(s, func() error {
			if err := d.CopyInAsync(p, unsafe.Pointer(&h[0]), 4*n, s); err != nil {
				return err
			}
			if err := d.Launch(f, Dim3{(n + 127) / 128, 1, 1}, Dim3{128, 1, 1}, 0, s, a); err != nil {
				return err
			}
			return d.CopyOutAsync(unsafe.Pointer(&h[0]), p, 4*n, s)
		})
		if err != nil {
			return err
		}
		defer d.DestroyGraph(g)
		if err := d.LaunchGraph(g, s); err != nil {
			return err
		}
		if err := d.Sync(s); err != nil {
			return err
		}
		for i, v := range h {
			if v != 2*float32(i)+1 {
				t.Errorf("x[%d] = %g after the graph, want %g", i, v, 2*float32(i)+1)
				break
			}
		}
		// cuBLAS: C (2x2) = A (2x3) W (3x2).
		b, err := d.NewBLAS("", s, 0, 0)
		if err != nil {
			return err
		}
		defer b.Close()
		m := []float32{1, 2, 3, 4, 5, 6, 1, 0, 0, 1, 1, 1}
		if err := d.CopyIn(p, unsafe.Pointer(&m[0]), 4*len(m)); err != nil {
			return err
		}
		if err := b.Gemm(2, 2, 3, p, 3, p.Add(24), 2, p.Add(48), 2, false); err != nil {
			return err
		}
		if err := d.Sync(s); err != nil {
			return err
		}
		out := make([]float32, 4)
		if err := d.CopyOut(unsafe.Pointer(&out[0]), p.Add(48), 16); err != nil {
			return err
		}
		if want := []float32{4, 5, 10, 11}; out[0] != want[0] || out[1] != want[1] || out[2] != want[2] || out[3] != want[3] {
			t.Errorf("gemm = %v, want %v", out, want)
		}
		// An error names the call and CUDA's message.
		if _, err := d.Alloc(1 << 62); err == nil {
			t.Error("allocating 4 EiB succeeded")
		} else {
			t.Logf("expected error: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
