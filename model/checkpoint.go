package model

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"rgcpred/rgc"
)

// Checkpoint file format, version 1 (all integers little-endian):
//
//	magic       8 bytes  "RGCPCKPT"
//	version     uint32   1
//	header_len  uint32   length of the JSON header in bytes
//	header      JSON     checkpointHeader: config, cell ids, time base,
//	                     stimulus mode, provenance, tensor table (name,
//	                     shape, byte offset),
//	                     data and train-state sizes
//	data        float32  every tensor of Config.Params in order, back to back
//	train_state bytes    opaque optimizer/resume state (may be empty)
//	crc         uint32   CRC-32C (Castagnoli) of everything above
//
// Readers bound every size before allocating and read data in chunks, so a
// corrupt or hostile file costs at most the memory its bytes occupy.
const (
	checkpointMagic   = "RGCPCKPT"
	checkpointVersion = 1

	maxHeaderBytes     = 64 << 20 // JSON header (cell ids are the bulk)
	maxCheckpointFloat = 1 << 28  // 1 GiB of weights
	maxTrainStateBytes = 4 << 30  // optimizer state (two moments + extras)
	readChunk          = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Provenance records where a checkpoint's weights came from.
type Provenance struct {
	// Data names the training data, e.g. the recording directory.
	Data string `json:"data"`
	// Steps is the number of optimizer steps taken.
	Steps int `json:"steps"`
	// ValNLL is the validation negative log-likelihood (nats per window) of
	// these weights.
	ValNLL float64 `json:"val_nll"`
	// ZeroInputNLL is the validation NLL of the zero-input model
	// (training-split class frequencies), for comparison; 0 if unknown.
	ZeroInputNLL float64 `json:"zero_input_nll,omitempty"`
	// Precision is the arithmetic of the training GEMMs, "fp32" or "bf16"
	// (empty: fp32, in checkpoints written before it was recorded), and
	// PrecisionPath how the last session ran bf16: "native" (AVX512_BF16
	// kernels) or "emulated" (operands rounded for the float32 kernels).
	Precision     string `json:"precision,omitempty"`
	PrecisionPath string `json:"precision_path,omitempty"`
	// Replicas is the number of data-parallel replicas of the last
	// session's training graph: batch norm took its training statistics
	// over each replica's share of the batch (0 or 1: the whole batch).
	Replicas int `json:"replicas,omitempty"`
	// EMA is the decay of the run's exponential moving average of the
	// weights (0: none). A best checkpoint of such a run holds the average;
	// a resume checkpoint holds the raw weights, the average in its
	// training state.
	EMA float64 `json:"ema,omitempty"`
	// TrainedAt is when training ended, RFC 3339.
	TrainedAt string `json:"trained_at"`
	// Notes is free text (command line, seed, anything useful).
	Notes string `json:"notes,omitempty"`
}

// Checkpoint is a trained model: weights, the mapping from the recording's
// cell cluster ids to embedding rows, the time base it was trained in, and
// where it came from.
type Checkpoint struct {
	// Weights holds the configuration and every tensor.
	Weights *Weights
	// CellIDs[i] is the cluster id of the cell whose embedding is row i;
	// len(CellIDs) == Weights.Config.NumCells and ids are distinct.
	CellIDs []int
	// BinRateHz is the bin rate of the training data (rgc.BinRateHz).
	BinRateHz float64
	// WindowBins is the input window length in bins (1024).
	WindowBins int
	// Horizon is the prediction period in bins (80).
	Horizon int
	// StimMode is the stimulus binning of the training data; the model
	// reads only input binned the same way (CheckInput). A file without
	// one was trained on rgc.StimZeroPhase, the only mode before modes
	// were recorded.
	StimMode rgc.StimMode
	// Provenance records the training run.
	Provenance Provenance
	// TrainState is opaque optimizer/resume state; empty for inference-only
	// checkpoints.
	TrainState []byte
}

// tensorEntry is one row of the header's tensor table.
type tensorEntry struct {
	Name   string `json:"name"`
	Shape  []int  `json:"shape"`
	Offset int64  `json:"offset"` // bytes from the start of the data section
}

type checkpointHeader struct {
	Config          Config        `json:"config"`
	CellIDs         []int         `json:"cell_ids"`
	BinRateHz       float64       `json:"bin_rate_hz"`
	WindowBins      int           `json:"window_bins"`
	Horizon         int           `json:"horizon"`
	StimMode        string        `json:"stim_mode,omitempty"`
	Provenance      Provenance    `json:"provenance"`
	Tensors         []tensorEntry `json:"tensors"`
	DataBytes       int64         `json:"data_bytes"`
	TrainStateBytes int64         `json:"train_state_bytes"`
}

// Validate checks the checkpoint's consistency: weights against their
// configuration (Weights.Check), the cell-id mapping and the time base.
func (c *Checkpoint) Validate() error {
	if c.Weights == nil {
		return errors.New("checkpoint: no weights")
	}
	if err := c.Weights.Check(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	cfg := c.Weights.Config
	if len(c.CellIDs) != cfg.NumCells {
		return fmt.Errorf("checkpoint: %d cell ids for %d embedding rows", len(c.CellIDs), cfg.NumCells)
	}
	seen := make(map[int]int, len(c.CellIDs))
	for i, id := range c.CellIDs {
		if j, dup := seen[id]; dup {
			return fmt.Errorf("checkpoint: cell id %d on embedding rows %d and %d", id, j, i)
		}
		seen[id] = i
	}
	if !(c.BinRateHz > 0) || math.IsInf(c.BinRateHz, 0) {
		return fmt.Errorf("checkpoint: bin rate %v Hz", c.BinRateHz)
	}
	if c.WindowBins != cfg.InBins {
		return fmt.Errorf("checkpoint: window of %d bins, config %s takes %d", c.WindowBins, cfg.Name(), cfg.InBins)
	}
	if c.Horizon != cfg.Classes-1 {
		return fmt.Errorf("checkpoint: horizon %d bins, config %s has %d classes", c.Horizon, cfg.Name(), cfg.Classes)
	}
	if _, err := c.StimMode.MarshalText(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// CheckInput reports an error naming both modes when the input the model
// is to read is binned in another stimulus mode than its training data.
func (c *Checkpoint) CheckInput(input rgc.StimMode) error {
	return rgc.CheckStimMode(c.StimMode, input)
}

// Write writes the checkpoint to w in the format described above.
func (c *Checkpoint) Write(w io.Writer) error {
	if err := c.Validate(); err != nil {
		return err
	}
	cfg := c.Weights.Config
	h := checkpointHeader{
		Config: cfg, CellIDs: c.CellIDs, BinRateHz: c.BinRateHz,
		WindowBins: c.WindowBins, Horizon: c.Horizon, StimMode: c.StimMode.String(),
		Provenance: c.Provenance, TrainStateBytes: int64(len(c.TrainState)),
	}
	if h.CellIDs == nil {
		h.CellIDs = []int{}
	}
	for _, p := range cfg.Params() {
		h.Tensors = append(h.Tensors, tensorEntry{Name: p.Name, Shape: p.Shape, Offset: h.DataBytes})
		h.DataBytes += 4 * int64(p.Size())
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("checkpoint header: %w", err)
	}
	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	var pre [16]byte
	copy(pre[:8], checkpointMagic)
	binary.LittleEndian.PutUint32(pre[8:], checkpointVersion)
	binary.LittleEndian.PutUint32(pre[12:], uint32(len(hj)))
	bw.Write(pre[:])
	bw.Write(hj)
	var b4 [4]byte
	for _, p := range cfg.Params() {
		for _, v := range c.Weights.Tensors[p.Name] {
			binary.LittleEndian.PutUint32(b4[:], math.Float32bits(v))
			bw.Write(b4[:])
		}
	}
	bw.Write(c.TrainState)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	binary.LittleEndian.PutUint32(b4[:], crc.Sum32())
	if _, err := w.Write(b4[:]); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// checkpointPerm is the mode of a saved checkpoint (before the umask):
// readable by every user, so a daemon running as another user can load it.
const checkpointPerm = 0o644

// saveSteps are the durability steps of Save, in the order Save takes
// them: sync the written temporary file, rename it over the target, sync
// the parent directory so the rename itself survives a crash. Tests
// substitute them to observe the order and inject failures.
type saveSteps struct {
	syncFile func(f *os.File) error
	rename   func(oldpath, newpath string) error
	syncDir  func(dir string) error
}

// osSaveSteps are the steps Save takes on the real file system.
var osSaveSteps = saveSteps{syncFile: (*os.File).Sync, rename: os.Rename, syncDir: syncDir}

// Save writes the checkpoint to path atomically and durably: to a new
// temporary file in the same directory (mode 0644 less the umask), synced,
// renamed over path, then the directory synced.
func (c *Checkpoint) Save(path string) error {
	if err := c.save(path, osSaveSteps); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", path, err)
	}
	return nil
}

// save implements Save with the given durability steps.
func (c *Checkpoint) save(path string, steps saveSteps) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := createTemp(dir, base+".tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := c.Write(f); err != nil {
		return fail(err)
	}
	if err := steps.syncFile(f); err != nil {
		return fail(fmt.Errorf("sync: %w", err))
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := steps.rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := steps.syncDir(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// createTemp creates a new file named prefix plus a random suffix in dir,
// with mode checkpointPerm less the umask (os.CreateTemp would give 0600).
func createTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, checkpointPerm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("create a temporary file in %s: no free name after 100 tries", dir)
}

// syncDir flushes directory dir's entries (a rename in it) to disk. File
// systems that cannot sync a directory report EINVAL or an unsupported
// operation; there is nothing more to do on those.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	return err
}

// LoadCheckpoint reads and validates the checkpoint file at path.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	defer f.Close()
	c, err := ReadCheckpoint(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	return c, nil
}

// crcReader reads from r and hashes what it reads.
type crcReader struct {
	r   io.Reader
	crc hash.Hash32
	n   int64
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// readFull reads exactly n bytes in chunks, so memory grows only with the
// bytes actually present.
func readFull(r io.Reader, n int64, what string) ([]byte, error) {
	var buf []byte
	for int64(len(buf)) < n {
		chunk := min(n-int64(len(buf)), readChunk)
		start := len(buf)
		buf = slices.Grow(buf, int(chunk))[:start+int(chunk)]
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("truncated in %s (%d of %d bytes)", what, start, n)
			}
			return nil, fmt.Errorf("reading %s: %w", what, err)
		}
	}
	return buf, nil
}

// ReadCheckpoint reads and validates a checkpoint from r. Any truncation,
// corruption (checksum), version or shape mismatch is an error.
func ReadCheckpoint(r io.Reader) (*Checkpoint, error) {
	cr := &crcReader{r: r, crc: crc32.New(crcTable)}
	var pre [16]byte
	if _, err := io.ReadFull(cr, pre[:]); err != nil {
		return nil, fmt.Errorf("checkpoint: short preamble: %w", err)
	}
	if string(pre[:8]) != checkpointMagic {
		return nil, fmt.Errorf("checkpoint: bad magic %q (not a checkpoint file)", pre[:8])
	}
	if v := binary.LittleEndian.Uint32(pre[8:]); v != checkpointVersion {
		return nil, fmt.Errorf("checkpoint: format version %d, this build reads %d", v, checkpointVersion)
	}
	hlen := int64(binary.LittleEndian.Uint32(pre[12:]))
	if hlen > maxHeaderBytes {
		return nil, fmt.Errorf("checkpoint: header of %d bytes exceeds the %d limit", hlen, maxHeaderBytes)
	}
	hj, err := readFull(cr, hlen, "header")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var h checkpointHeader
	if err := json.Unmarshal(hj, &h); err != nil {
		return nil, fmt.Errorf("checkpoint: header: %w", err)
	}
	mode := rgc.StimZeroPhase // files before modes were recorded
	if h.StimMode != "" {
		if mode, err = rgc.ParseStimMode(h.StimMode); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	cfg := h.Config
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	// Bound the model's size before asking Config.Params for shapes.
	if err := boundConfig(cfg); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	params := cfg.Params()
	if len(h.Tensors) != len(params) {
		return nil, fmt.Errorf("checkpoint: %d tensors in the table, config %s has %d", len(h.Tensors), cfg.Name(), len(params))
	}
	var off int64
	for i, p := range params {
		e := h.Tensors[i]
		if e.Name != p.Name || !slices.Equal(e.Shape, p.Shape) {
			return nil, fmt.Errorf("checkpoint: tensor %d is %s %v, config %s wants %s %v", i, e.Name, e.Shape, cfg.Name(), p.Name, p.Shape)
		}
		if e.Offset != off {
			return nil, fmt.Errorf("checkpoint: tensor %s at byte %d, want %d", e.Name, e.Offset, off)
		}
		off += 4 * int64(p.Size())
	}
	if h.DataBytes != off {
		return nil, fmt.Errorf("checkpoint: data section of %d bytes, tensors need %d", h.DataBytes, off)
	}
	if h.TrainStateBytes < 0 || h.TrainStateBytes > maxTrainStateBytes {
		return nil, fmt.Errorf("checkpoint: train state of %d bytes (limit %d)", h.TrainStateBytes, int64(maxTrainStateBytes))
	}
	w := &Weights{Config: cfg, Tensors: make(map[string][]float32, len(params))}
	for _, p := range params {
		raw, err := readFull(cr, 4*int64(p.Size()), "tensor "+p.Name)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		t := make([]float32, p.Size())
		for i := range t {
			t[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		w.Tensors[p.Name] = t
	}
	state, err := readFull(cr, h.TrainStateBytes, "train state")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	sum := cr.crc.Sum32()
	var tail [5]byte
	n, err := io.ReadFull(r, tail[:])
	switch {
	case n < 4:
		return nil, fmt.Errorf("checkpoint: truncated before the checksum")
	case n == 5:
		return nil, fmt.Errorf("checkpoint: trailing bytes after the checksum")
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("checkpoint: reading checksum: %w", err)
	}
	if got := binary.LittleEndian.Uint32(tail[:4]); got != sum {
		return nil, fmt.Errorf("checkpoint: checksum mismatch (file says %08x, content hashes to %08x): corrupt file", got, sum)
	}
	c := &Checkpoint{
		Weights: w, CellIDs: h.CellIDs, BinRateHz: h.BinRateHz,
		WindowBins: h.WindowBins, Horizon: h.Horizon, StimMode: mode, Provenance: h.Provenance,
	}
	if len(state) > 0 {
		c.TrainState = state
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// boundConfig rejects configurations whose tensors would exceed
// maxCheckpointFloat elements, checking each size without overflow.
func boundConfig(c Config) error {
	dims := []int{c.NumCells, c.StemCh, c.BlockMid, c.BlockOut, c.StemKernel, c.BlockKernel,
		c.Layers, c.Heads, c.HeadDim, c.Mixtures, c.SEReduction}
	for _, d := range dims {
		if d < 0 || d > 1<<20 {
			return fmt.Errorf("config dimension %d out of range", d)
		}
	}
	lim := float64(maxCheckpointFloat)
	w := float64(c.Heads) * float64(c.HeadDim)
	sizes := []float64{
		float64(c.NumCells) * w, 12 * w * w * float64(c.Layers),
		float64(c.BlockMid) * float64(c.BlockMid) * float64(c.BlockKernel) * 4,
		float64(c.StemCh) * float64(c.StemCh) * float64(c.StemKernel),
		float64(c.BlockMid) * float64(c.BlockOut) * 8,
		w * 3 * float64(c.Mixtures), w * float64(c.BlockOut),
	}
	var tot float64
	for _, s := range sizes {
		tot += s
	}
	if tot > lim {
		return fmt.Errorf("config %s needs ~%.0f weights, over the %d limit", c.Name(), tot, maxCheckpointFloat)
	}
	return nil
}

// Equal reports whether two checkpoints hold the same configuration,
// weights (bit for bit), cell ids, time base, stimulus mode, provenance and
// train state.
func (c *Checkpoint) Equal(o *Checkpoint) bool {
	return c.Weights.Equal(o.Weights) && slices.Equal(c.CellIDs, o.CellIDs) &&
		c.BinRateHz == o.BinRateHz && c.WindowBins == o.WindowBins && c.Horizon == o.Horizon && c.StimMode == o.StimMode &&
		c.Provenance == o.Provenance && bytes.Equal(c.TrainState, o.TrainState)
}
