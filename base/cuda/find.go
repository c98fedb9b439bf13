package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// LibEnv is the environment variable naming the folders (a list separated
// by the OS's path separator, as PATH) searched before any other for the
// CUDA libraries; predictord's --cuda-lib flag sets it too.
const LibEnv = "RGCPRED_CUDA_LIB"

// The libraries, each by the file names that a CUDA install or the NVIDIA
// Python wheels give it, newest first. libcuda comes with the driver;
// NVRTC and cuBLAS with the toolkit (CUDA 11.2 and later: NVRTC's soname
// carries the major.minor of its first release in the major series).
// PyTorch's CUDA 11 wheels carry them in torch/lib under hashed names
// (libnvrtc-672ee683.so.11.2), which findLib matches too.
var (
	driverNames = []string{"libcuda.so.1", "libcuda.so"}
	nvrtcNames  = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}
	cublasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}
	cudartNames = []string{"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}
)

// SearchDirs returns the folders searched for the CUDA libraries, in
// order: those named by extra (a flag) and by $RGCPRED_CUDA_LIB, then
// $LD_LIBRARY_PATH, $CUDA_HOME and $CUDA_PATH (their lib64), the usual
// toolkit folders (/usr/local/cuda/lib64, /usr/local/cuda/targets/*/lib,
// /usr/local/cuda-*/lib64), the driver's folders in containers
// (/usr/local/nvidia/lib64), the Python environments' libraries: the
// NVIDIA wheels' site-packages/nvidia/*/lib and PyTorch's
// site-packages/torch/lib under every python3* of /usr/lib,
// /usr/local/lib, ~/.local/lib, $VIRTUAL_ENV, $CONDA_PREFIX and
// /opt/conda (a conda not activated), and the latter two's lib; then the
// distribution's library folders. A folder appears once; missing ones are
// kept (the search skips them) so that an error can name every place
// tried. Where none holds a library, openLib asks the dynamic loader
// (its cache) for it by soname.
func SearchDirs(extra string) []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(ds ...string) {
		for _, d := range ds {
			if d == "" || seen[d] {
				continue
			}
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	add(filepath.SplitList(extra)...)
	add(filepath.SplitList(os.Getenv(LibEnv))...)
	add(filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if h := os.Getenv(v); h != "" {
			add(filepath.Join(h, "lib64"), filepath.Join(h, "lib"))
		}
	}
	add("/usr/local/cuda/lib64", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib") // the latter: containers given the driver
	add(globSorted("/usr/local/cuda/targets/*/lib")...)
	add(globSorted("/usr/local/cuda-*/lib64")...)
	home, _ := os.UserHomeDir()
	roots := []string{"/usr/lib", "/usr/local/lib"}
	if home != "" {
		roots = append(roots, filepath.Join(home, ".local/lib"))
	}
	for _, p := range []string{os.Getenv("VIRTUAL_ENV"), os.Getenv("CONDA_PREFIX"), "/opt/conda"} {
		if p != "" {
			roots = append(roots, filepath.Join(p, "lib"))
			add(filepath.Join(p, "lib")) // conda's own libraries
		}
	}
	for _, r := range roots {
		for _, sp := range []string{"site-packages", "dist-packages"} {
			add(globSorted(filepath.Join(r, "python3*", sp, "nvidia", "*", "lib"))...)
			add(globSorted(filepath.Join(r, "python3*", sp, "torch", "lib"))...)
		}
	}
	add("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib")
	return dirs
}

// globSorted is filepath.Glob, newest-looking names first (reverse order,
// so cuda-12.4 precedes cuda-11.8).
func globSorted(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	sort.Sort(sort.Reverse(sort.StringSlice(m)))
	return m
}

// findLib returns the path of the first of names found in dirs (each
// folder searched for every name, and its hashed form, before the next
// folder), or an error naming what was looked for and where.
func findLib(what string, names, dirs []string) (string, error) {
	for _, d := range dirs {
		var entries []os.DirEntry
		for _, n := range names {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
			if entries == nil {
				entries, _ = os.ReadDir(d)
			}
			if h := hashed(n, entries); h != "" {
				return filepath.Join(d, h), nil
			}
		}
	}
	return "", fmt.Errorf("cuda: %s not found (looked for %s in %s; name its folder with $%s or --cuda-lib)",
		what, strings.Join(names, ", "), strings.Join(dirs, ", "), LibEnv)
}

// hashed returns the entry that is name with a wheel's hash after its
// stem (libnvrtc.so.11.2: libnvrtc-672ee683.so.11.2, as auditwheel renames
// the libraries it bundles), or "".
func hashed(name string, entries []os.DirEntry) string {
	i := strings.Index(name, ".so")
	if i < 0 {
		return ""
	}
	stem, suffix := name[:i], name[i:]
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasPrefix(n, stem+"-") || !strings.HasSuffix(n, suffix) {
			continue
		}
		if h := n[len(stem)+1 : len(n)-len(suffix)]; len(h) == 8 && strings.Trim(h, "0123456789abcdef") == "" {
			return n
		}
	}
	return ""
}
