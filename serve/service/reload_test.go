package service

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
)

// TestReloadRefusesSmallerBatch: a reloaded model whose largest batch is
// below the batch the cores call with is refused with an error naming the
// checkpoint and both sizes; it is closed, the old model keeps serving and
// the failed reload is counted. A model of the same batch then reloads.
func TestReloadRefusesSmallerBatch(t *testing.T) {
	cells := []int{1, 2, 3, 4} // more than the serving batch
	for _, tc := range []struct {
		name     string
		newBatch int
		wantErr  string
	}{
		{"below the serving batch", 2, "new model's max batch 2 is below the serving batch 3"},
		{"equal", 3, ""},
		{"any batch", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var loads, closed atomic.Int32
			names := []string{"first", "second"}
			load := func(_ string, maxBatch int) (*Model, error) {
				n := loads.Add(1)
				mb := maxBatch
				if n > 1 {
					mb = tc.newBatch
				}
				return &Model{Predictor: fakepred.New(cells), Cells: cells, MaxBatch: mb, BinRateHz: rgc.BinRateHz,
					Name: names[min(n, 2)-1], Close: func() error { closed.Add(1); return nil }}, nil
			}
			s, err := New(Config{Devices: []string{"dev0"}, ModelPath: "x.ckpt", Log: zerolog.Nop(), Load: load, MaxBatch: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.Reload()
			ok, failed := value(t, s.m.reloads.WithLabelValues("ok")), value(t, s.m.reloads.WithLabelValues("error"))
			if tc.wantErr == "" {
				if err != nil || s.model.Load().Name != "second" || ok != 1 || closed.Load() != 1 {
					t.Fatalf("Reload: %v; serving %q, %v reloads ok, %d models closed: want the second model, the first closed", err, s.model.Load().Name, ok, closed.Load())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "x.ckpt") {
				t.Fatalf("Reload: %v, want an error naming x.ckpt and %q", err, tc.wantErr)
			}
			if s.model.Load().Name != "first" || closed.Load() != 1 || failed != 1 || ok != 0 {
				t.Fatalf("after the refused reload: serving %q, %d models closed, reloads %v failed %v ok; want the first, the refused one closed, one failure",
					s.model.Load().Name, closed.Load(), failed, ok)
			}
		})
	}
}
