package engine

import "testing"

func BenchmarkGelu16K(b *testing.B) {
	x := make([]float32, 16384)
	for i := range x {
		x[i] = float32(i%200)/50 - 2
	}
	y := make([]float32, len(x))
	c0 := processCPU()
	for b.Loop() {
		copy(y, x)
		geluTanh(y)
	}
	b.ReportMetric((processCPU()-c0)/float64(b.N)/16384*1e9, "cpu-ns/elem")
}

func BenchmarkStages(b *testing.B) {
	w := randomWeights(b, "gpt-a-cat", len(cellIDs), 1)
	e, _ := NewFromWeights(w, cellIDs, 1, 1)
	batch := randomBatch(1, cellIDs, 2)
	n := e.net
	wk := e.workers[0]
	c0 := processCPU()
	for b.Loop() {
		n.forward(wk, batch.Inputs, 0, wk.logits)
	}
	tot := (processCPU() - c0) / float64(b.N)
	c0 = processCPU()
	for i := 0; i < b.N; i++ {
		c := n.cfg
		p := n.conv1.pad
		for r := 0; r < c.InRows; r++ {
			row := batch.Inputs[r*n.bins : (r+1)*n.bins]
			dst := wk.in[p*c.InRows+r:]
			for j, v := range row {
				dst[j*c.InRows] = v
			}
		}
		c1 := wk.c1[n.conv2.pad*c.StemCh:]
		n.conv1.apply(wk.in, n.stemLen, c1, true, wk.work)
		n.conv2.apply(wk.c1, n.stemLen, wk.c2, true, wk.work)
	}
	stem := (processCPU() - c0) / float64(b.N)
	c0 = processCPU()
	for i := 0; i < b.N; i++ {
		x := wk.c2
		for i := range n.blocks {
			x = n.blocks[i].forward(wk, &wk.blocks[i], x)
		}
	}
	blocks := (processCPU() - c0) / float64(b.N)
	b.ReportMetric(tot*1e3, "total-ms")
	b.ReportMetric(stem*1e3, "stem-ms")
	b.ReportMetric(blocks*1e3, "blocks-ms")
	b.ReportMetric((tot-stem-blocks)*1e3, "gpt-ms")
}
