package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFindLib(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	mk("a/libnvrtc.so")
	mk("b/libnvrtc.so.12")
	mk("b/libcublas.so.12")
	if err := os.MkdirAll(filepath.Join(root, "c/libcuda.so.1"), 0o755); err != nil { // a folder, not a library
		t.Fatal(err)
	}
	c := filepath.Join(root, "c")
	for _, tc := range []struct {
		name  string
		names []string
		dirs  []string
		want  string // "" for not found
	}{
		{"first folder wins over a better name later", nvrtcNames, []string{a, b}, filepath.Join(a, "libnvrtc.so")},
		{"best name within a folder", nvrtcNames, []string{b, a}, filepath.Join(b, "libnvrtc.so.12")},
		{"missing folders skipped", cublasNames, []string{filepath.Join(root, "none"), b}, filepath.Join(b, "libcublas.so.12")},
		{"a folder named like the library is not it", driverNames, []string{c}, ""},
		{"nothing anywhere", driverNames, []string{a, b}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findLib("lib", tc.names, tc.dirs)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), LibEnv) || !strings.Contains(err.Error(), tc.dirs[0]) {
					t.Fatalf("findLib = %q, %v; want an error naming $%s and the folders", got, err, LibEnv)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("findLib = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSearchDirsOrder(t *testing.T) {
	root := t.TempDir()
	venv := filepath.Join(root, "venv")
	wheel := filepath.Join(venv, "lib", "python3.11", "site-packages", "nvidia", "cublas", "lib")
	if err := os.MkdirAll(wheel, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(LibEnv, "/env/one"+string(os.PathListSeparator)+"/env/two")
	t.Setenv("LD_LIBRARY_PATH", "/ld/path"+string(os.PathListSeparator)+"/env/one")
	t.Setenv("CUDA_HOME", "/opt/cuda")
	t.Setenv("CUDA_PATH", "")
	t.Setenv("VIRTUAL_ENV", venv)
	dirs := SearchDirs("/flag/dir")
	idx := func(d string) int {
		i := slices.Index(dirs, d)
		if i < 0 {
			t.Fatalf("SearchDirs has no %s: %v", d, dirs)
		}
		return i
	}
	order := []string{"/flag/dir", "/env/one", "/env/two", "/ld/path", "/opt/cuda/lib64", "/usr/local/cuda/lib64", wheel, "/usr/lib/x86_64-linux-gnu"}
	for i := 1; i < len(order); i++ {
		if idx(order[i-1]) >= idx(order[i]) {
			t.Errorf("%s comes after %s in %v", order[i-1], order[i], dirs)
		}
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			t.Errorf("%s listed twice", d)
		}
		seen[d] = true
	}
}

// TestFindHashed: PyTorch's CUDA 11 wheels name their libraries with a
// hash (libnvrtc-672ee683.so.11.2); findLib takes those, and not a
// neighbour that only shares a prefix (libnvrtc-builtins, libcublasLt).
func TestFindHashed(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"libnvrtc-builtins.so.11.7", "libcublasLt-b6d14a74.so.11", "libnvrtc-672ee683.so.11.2", "libcudart-e409450e.so.11.0"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nvrtcNames, "libnvrtc-672ee683.so.11.2"},
		{cudartNames, "libcudart-e409450e.so.11.0"},
		{cublasNames, ""},
		{driverNames, ""},
	} {
		got, err := findLib("lib", tc.names, []string{dir})
		if tc.want == "" {
			if err == nil {
				t.Errorf("%v: found %s, want nothing", tc.names, got)
			}
			continue
		}
		if err != nil || got != filepath.Join(dir, tc.want) {
			t.Errorf("%v: %q, %v; want %s", tc.names, got, err, tc.want)
		}
	}
}

// TestLoaderFallback: a library in no folder searched is opened through
// the dynamic loader by its soname, and its path is the file mapped (libc
// stands in for libcuda); a name the loader lacks is an error saying both
// searches failed.
func TestLoaderFallback(t *testing.T) {
	empty := []string{t.TempDir()}
	l, err := openLib("libc", []string{"libc.so.6"}, empty)
	if err != nil {
		t.Fatalf("libc.so.6 through the loader: %v", err)
	}
	if !filepath.IsAbs(l.path) || !strings.Contains(filepath.Base(l.path), "libc") {
		t.Errorf("path %q, want the mapped file of libc", l.path)
	}
	if _, err := openLib("none", []string{"libnosuchcuda.so.1", "libnosuchcuda.so"}, empty); err == nil || !strings.Contains(err.Error(), "dynamic loader") {
		t.Errorf("missing library: error %v, want one naming the loader too", err)
	}
}

// TestSearchDirsPython: the folders of an unactivated conda (/opt/conda)
// and PyTorch's torch/lib are searched.
func TestSearchDirsPython(t *testing.T) {
	venv := t.TempDir()
	tlib := filepath.Join(venv, "lib", "python3.10", "site-packages", "torch", "lib")
	if err := os.MkdirAll(tlib, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", venv)
	t.Setenv("CONDA_PREFIX", "")
	dirs := SearchDirs("")
	for _, d := range []string{"/opt/conda/lib", tlib} {
		if !slices.Contains(dirs, d) {
			t.Errorf("SearchDirs has no %s: %v", d, dirs)
		}
	}
}

// TestLibraries: the inventory lists the kernel module, libcuda, NVRTC,
// the runtime, cuBLAS and cuBLASLt, each with a path and version or an
// error; NVRTC's version is what it reports itself where it is here.
func TestLibraries(t *testing.T) {
	libs := Libraries("")
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
		if (l.Error == "") == (l.Version == "") && l.Name != "libcublasLt" {
			t.Errorf("%s: version %q, error %q: want one of them", l.Name, l.Version, l.Error)
		}
		t.Log(l)
	}
	want := []string{"nvidia kernel module", "libcuda", "libnvrtc", "libcudart", "libcublas", "libcublasLt"}
	if !slices.Equal(names, want) {
		t.Fatalf("libraries %v, want %v", names, want)
	}
	if nv, err := LoadNVRTC(""); err == nil {
		ma, mi, _ := nv.Version()
		if got := libs[2]; got.Version != fmt.Sprintf("%d.%d", ma, mi) || got.Path != nv.Path() {
			t.Errorf("libnvrtc %+v, want version %d.%d at %s", got, ma, mi, nv.Path())
		}
	}
}

func TestKernelModule(t *testing.T) {
	p := filepath.Join(t.TempDir(), "version")
	if err := os.WriteFile(p, []byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := kernelModule(p); l.Version != "535.104.05" || l.Error != "" {
		t.Errorf("kernelModule = %+v, want 535.104.05", l)
	}
	if l := kernelModule(filepath.Join(t.TempDir(), "none")); l.Error == "" || l.Version != "" {
		t.Errorf("no module: %+v, want an error", l)
	}
}
