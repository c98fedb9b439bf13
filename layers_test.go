package rgcpred

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// floors maps each top-level folder to its floor, bottom up; doc.go and
// docs/architecture.md state the same table.
var floors = map[string]int{
	"base":       0,
	"rgc":        1,
	"model":      2,
	"rollout":    3,
	"stream":     3,
	"evaluation": 4,
	"experiment": 4,
	"serve":      5,
	"bench":      6,
	"cmd":        7,
}

const module = "rgcpred"

// floorOf returns the floor of a package path in this module, or -1 for the
// module root.
func floorOf(t *testing.T, pkg string) int {
	rel := strings.TrimPrefix(pkg, module)
	if rel == "" {
		return -1
	}
	top := strings.SplitN(strings.TrimPrefix(rel, "/"), "/", 2)[0]
	f, ok := floors[top]
	if !ok {
		t.Errorf("package %s is in folder %q, which has no floor: add it to floors, doc.go and docs/architecture.md", pkg, top)
		return -1
	}
	return f
}

// TestLayers checks that no package imports one in a folder on a higher
// floor. Test files may import higher floors (a stream test starts an
// embedded NATS server from serve/embednats); the packages themselves may not.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		n++
		from := floorOf(t, p.ImportPath)
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if to := floorOf(t, imp); from >= 0 && to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d)", p.ImportPath, from, imp, to)
			}
		}
	}
	if n < 30 {
		t.Fatalf("go list returned %d packages; expected the whole module", n)
	}
}
