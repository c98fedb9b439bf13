package torchmap

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"rgcpred/model"
	"rgcpred/model/safetensors"
)

// Metadata keys Export writes (all values are strings, as the format
// requires; JSON where structured).
const (
	// MetaFormat is the Hugging Face convention for the framework ("pt").
	MetaFormat = "format"
	// MetaConfig holds model.Config as JSON.
	MetaConfig = "rgcpred.config"
	// MetaCellIDs holds the cluster id of each embedding row as a JSON array.
	MetaCellIDs = "rgcpred.cell_ids"
	// MetaBinRateHz holds the training data's bin rate (shortest exact decimal).
	MetaBinRateHz = "rgcpred.bin_rate_hz"
	// MetaWindowBins holds the input window length in bins.
	MetaWindowBins = "rgcpred.window_bins"
	// MetaHorizon holds the prediction period in bins.
	MetaHorizon = "rgcpred.horizon"
	// MetaStimMode holds the training data's stimulus mode (rgc.StimMode's
	// name); a file without it was trained on zero-phase bins, the
	// reference pipeline's.
	MetaStimMode = "rgcpred.stim_mode"
	// MetaProvenance holds model.Provenance as JSON.
	MetaProvenance = "rgcpred.provenance"
	// MetaTorchModule describes the PyTorch module the tensors load into.
	MetaTorchModule = "rgcpred.torch_module"
)

// Export converts a checkpoint to a safetensors file in the layout of
// SpikeModel's state_dict: F32 tensors under PyTorch module names, linear
// weights transposed to [out, in], plus the mask and num_batches_tracked
// buffers, so that model.load_state_dict(tensors) succeeds with
// strict=True. The metadata carries the configuration, cell ids, time base,
// stimulus mode and provenance, so Import restores the checkpoint bit for bit (the
// optimizer state, TrainState, is not exported).
func Export(ck *model.Checkpoint) (*safetensors.File, error) {
	if err := ck.Validate(); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	cfg := ck.Weights.Config
	f := &safetensors.File{Metadata: map[string]string{
		MetaFormat:      "pt",
		MetaBinRateHz:   strconv.FormatFloat(ck.BinRateHz, 'g', -1, 64),
		MetaWindowBins:  strconv.Itoa(ck.WindowBins),
		MetaHorizon:     strconv.Itoa(ck.Horizon),
		MetaStimMode:    ck.StimMode.String(),
		MetaTorchModule: TorchModule(cfg),
	}}
	for key, v := range map[string]any{MetaConfig: cfg, MetaCellIDs: ck.CellIDs, MetaProvenance: ck.Provenance} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("export: %s: %w", key, err)
		}
		f.Metadata[key] = string(b)
	}
	for _, m := range mappings(cfg) {
		v := ck.Weights.Tensors[m.ours]
		shape := m.shape
		if m.transpose {
			v = transpose(v, m.shape[0], m.shape[1])
			shape = []int{m.shape[1], m.shape[0]}
		}
		f.Tensors = append(f.Tensors, safetensors.FromFloat32(m.torch, shape, v))
	}
	for _, p := range batchNormPrefixes(cfg) {
		f.Tensors = append(f.Tensors, safetensors.FromInt64(p+BatchesTrackedSuffix, []int{}, []int64{0}))
	}
	T := cfg.Tokens()
	f.Tensors = append(f.Tensors, safetensors.FromFloat32(MaskName, []int{T, T}, causalMask(T)))
	return f, nil
}

// causalMask returns SpikeModel's mask buffer: triu(full(-inf), 1).
func causalMask(T int) []float32 {
	m := make([]float32, T*T)
	for i := 0; i < T; i++ {
		for j := i + 1; j < T; j++ {
			m[i*T+j] = float32(math.Inf(-1))
		}
	}
	return m
}

// TorchModule describes the PyTorch module whose state_dict the exported
// tensors are, as a constructor call of torchref.py's SpikeModel with the
// CNN sizes it must be built with.
func TorchModule(c model.Config) string {
	return fmt.Sprintf("SpikeModel(layers=%d, heads=%d, dhead=%d, ncells=%d, nout=%d) with CNN(in=%d, stem=%d, k=%d, mid=%d, out=%d, block_k=%d, se_r=%d); GELU tanh approximation",
		c.Layers, c.Heads, c.HeadDim, c.NumCells, c.HeadOut(), c.InRows, c.StemCh, c.StemKernel, c.BlockMid, c.BlockOut, c.BlockKernel, c.SEReduction)
}
