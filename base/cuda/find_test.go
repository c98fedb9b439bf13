package cuda

import (
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
