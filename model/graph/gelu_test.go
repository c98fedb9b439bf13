package graph

import (
	"testing"

	"rgcpred/base/vec"
	"rgcpred/model"
)

// TestGELUCubicAgrees: the GELU kernels (base/vec, whose assembly holds the
// constant) use the model definition's cubic coefficient.
func TestGELUCubicAgrees(t *testing.T) {
	if vec.GELUCubic != model.GELUCubic {
		t.Errorf("vec.GELUCubic %v, model.GELUCubic %v", vec.GELUCubic, model.GELUCubic)
	}
}
