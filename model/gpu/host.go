package gpu

import (
	"fmt"
	"math"

	"rgcpred/rgc"
)

// stage writes windows lo..hi of b (inputs and embedding rows, row of
// window i via rowOf) into host, the host copy of the activations arena's
// first two regions (inputs, rows), as window i-lo.
func (n *net) stage(host []float32, b *rgc.Batch, lo, hi int, rowOf map[int]int) error {
	copy(host[n.in.off:n.in.off+(hi-lo)*rgc.WindowLen], b.Inputs[lo*rgc.WindowLen:hi*rgc.WindowLen])
	rows := host[n.rows.off:]
	for i := lo; i < hi; i++ {
		r, ok := rowOf[b.Cells[i]]
		if !ok {
			return fmt.Errorf("gpu: window %d: unknown cell id %d (model %s knows %d cells)", i, b.Cells[i], n.p.Config.Name(), len(rowOf))
		}
		rows[i-lo] = math.Float32frombits(uint32(int32(r)))
	}
	return nil
}

// hostLen is the length of the host copy of the inputs and rows regions.
func (n *net) hostLen() int { return n.rows.off + n.lay.maxBatch }

// emulatePlan runs ops on the CPU (emulate) over the weights and a fresh
// activations arena whose inputs and rows are host's, calling after (if
// not nil) after each op with the arenas. It returns the activations.
func (n *net) emulatePlan(ops []Op, host []float32, after func(i int, mem [numArenas][]float32)) []float32 {
	acts := make([]float32, n.lay.total)
	copy(acts, host[:n.hostLen()])
	mem := [numArenas][]float32{arenaWeights: n.w.data, arenaActs: acts}
	for i := range ops {
		emulate(&ops[i], mem)
		if after != nil {
			after(i, mem)
		}
	}
	return acts
}

// rowsOf maps each cluster id of ids to its embedding row (its index).
func rowsOf(ids []int) map[int]int {
	m := make(map[int]int, len(ids))
	for i, id := range ids {
		m[id] = i
	}
	return m
}
