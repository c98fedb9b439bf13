// Package safetensors reads and writes the safetensors file format, the
// tensor container of the PyTorch and Hugging Face ecosystem:
//
//	header_len  uint64 little-endian: length N of the header in bytes
//	header      N bytes of UTF-8 JSON, an object mapping each tensor name to
//	            {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}
//	            plus an optional "__metadata__" object of string values;
//	            writers pad it with spaces to a multiple of 8 bytes
//	data        the tensors' bytes, row-major and little-endian; offsets are
//	            relative to the start of this section, and the tensors cover
//	            it exactly, without gaps or overlaps
//
// The package is format-level only: it knows dtypes, shapes and offsets,
// not what the tensors mean. Parsing validates every size and offset before
// allocating and reports what is wrong with a clear error.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// MetadataKey is the header key of the free-form string metadata.
const MetadataKey = "__metadata__"

// MaxHeaderBytes bounds the JSON header accepted by the reader (the
// reference implementation's limit).
const MaxHeaderBytes = 100 << 20

// maxDims bounds a tensor's rank.
const maxDims = 64

// DType is a tensor element type, spelled as in the format.
type DType string

// The element types of the format.
const (
	Bool   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
)

// Size returns the element size in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case Bool, U8, I8, F8E5M2, F8E4M3:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case I64, U64, F64:
		return 8
	}
	return 0
}

// Tensor is one named tensor: its element type, shape and raw little-endian
// bytes (len(Data) == NumElements() * DType.Size()).
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// NumElements returns the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// FromFloat32 returns an F32 tensor holding v with the given shape; it
// panics if the shape does not match len(v) (a programming error).
func FromFloat32(name string, shape []int, v []float32) Tensor {
	t := Tensor{Name: name, DType: F32, Shape: slices.Clone(shape), Data: make([]byte, 4*len(v))}
	if t.NumElements() != len(v) {
		panic(fmt.Sprintf("safetensors: tensor %s: shape %v holds %d values, got %d", name, shape, t.NumElements(), len(v)))
	}
	for i, x := range v {
		binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(x))
	}
	return t
}

// FromInt64 returns an I64 tensor holding v with the given shape; it panics
// if the shape does not match len(v).
func FromInt64(name string, shape []int, v []int64) Tensor {
	t := Tensor{Name: name, DType: I64, Shape: slices.Clone(shape), Data: make([]byte, 8*len(v))}
	if t.NumElements() != len(v) {
		panic(fmt.Sprintf("safetensors: tensor %s: shape %v holds %d values, got %d", name, shape, t.NumElements(), len(v)))
	}
	for i, x := range v {
		binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(x))
	}
	return t
}

// Float32s returns the elements as float32. F32 is copied bit for bit; F16
// and BF16 widen exactly; F64 is rounded to the nearest float32 and an
// element outside float32's range is an error.
func (t *Tensor) Float32s() ([]float32, error) {
	n := t.NumElements()
	out := make([]float32, n)
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case F64:
		for i := range out {
			v := math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
			if math.Abs(v) > math.MaxFloat32 && !math.IsInf(v, 0) {
				return nil, fmt.Errorf("safetensors: tensor %s[%d] = %g overflows float32", t.Name, i, v)
			}
			out[i] = float32(v)
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
		}
	case F16:
		for i := range out {
			out[i] = half(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	default:
		return nil, fmt.Errorf("safetensors: tensor %s has dtype %s, want a float type (F32, F64, F16, BF16)", t.Name, t.DType)
	}
	return out, nil
}

// Int64s returns the elements of an integer tensor as int64; a U64 element
// above math.MaxInt64 is an error.
func (t *Tensor) Int64s() ([]int64, error) {
	n := t.NumElements()
	out := make([]int64, n)
	for i := range out {
		switch t.DType {
		case I64:
			out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		case U64:
			u := binary.LittleEndian.Uint64(t.Data[8*i:])
			if u > math.MaxInt64 {
				return nil, fmt.Errorf("safetensors: tensor %s[%d] = %d overflows int64", t.Name, i, u)
			}
			out[i] = int64(u)
		case I32:
			out[i] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		case U32:
			out[i] = int64(binary.LittleEndian.Uint32(t.Data[4*i:]))
		case I16:
			out[i] = int64(int16(binary.LittleEndian.Uint16(t.Data[2*i:])))
		case U16:
			out[i] = int64(binary.LittleEndian.Uint16(t.Data[2*i:]))
		case I8:
			out[i] = int64(int8(t.Data[i]))
		case U8, Bool:
			out[i] = int64(t.Data[i])
		default:
			return nil, fmt.Errorf("safetensors: tensor %s has dtype %s, want an integer type", t.Name, t.DType)
		}
	}
	return out, nil
}

// half converts an IEEE 754 binary16 value to float32 exactly.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac x 2^-24
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// File is the content of a safetensors file: string metadata and tensors,
// in file (data) order.
type File struct {
	// Metadata is the header's "__metadata__" object (nil if absent).
	Metadata map[string]string
	// Tensors are the file's tensors; names are unique.
	Tensors []Tensor
}

// Tensor returns the tensor called name, or nil.
func (f *File) Tensor(name string) *Tensor {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}

// Names returns the tensor names in file order.
func (f *File) Names() []string {
	out := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		out[i] = t.Name
	}
	return out
}

// entry is a tensor's header record.
type entry struct {
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// check verifies a tensor's name, dtype, shape and data length.
func (t *Tensor) check() error {
	if t.Name == "" || t.Name == MetadataKey {
		return fmt.Errorf("safetensors: invalid tensor name %q", t.Name)
	}
	if t.DType.Size() == 0 {
		return fmt.Errorf("safetensors: tensor %s: unknown dtype %q", t.Name, t.DType)
	}
	n, err := numElements(t.Shape)
	if err != nil {
		return fmt.Errorf("safetensors: tensor %s: %w", t.Name, err)
	}
	if want := n * int64(t.DType.Size()); int64(len(t.Data)) != want {
		return fmt.Errorf("safetensors: tensor %s: %d data bytes, shape %v of %s needs %d", t.Name, len(t.Data), t.Shape, t.DType, want)
	}
	return nil
}

// numElements multiplies the shape, rejecting negative dimensions and
// products beyond 2^50.
func numElements(shape []int) (int64, error) {
	if len(shape) > maxDims {
		return 0, fmt.Errorf("rank %d exceeds %d", len(shape), maxDims)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && n > (1<<50)/int64(d) {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= int64(d)
	}
	return n, nil
}

// Write writes the file: tensors in their order, the header padded with
// spaces to a multiple of 8 bytes. Tensor names must be unique.
func (f *File) Write(w io.Writer) error {
	hdr := make(map[string]any, len(f.Tensors)+1)
	if len(f.Metadata) > 0 {
		hdr[MetadataKey] = f.Metadata
	}
	var off int64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if err := t.check(); err != nil {
			return err
		}
		if _, dup := hdr[t.Name]; dup {
			return fmt.Errorf("safetensors: duplicate tensor name %q", t.Name)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = entry{DType: t.DType, Shape: shape, DataOffsets: [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	hj, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: header: %w", err)
	}
	if pad := (8 - len(hj)%8) % 8; pad > 0 {
		hj = append(hj, strings.Repeat(" ", pad)...)
	}
	var pre [8]byte
	binary.LittleEndian.PutUint64(pre[:], uint64(len(hj)))
	if _, err := w.Write(pre[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(hj); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, t := range f.Tensors {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: write: %w", err)
		}
	}
	return nil
}

// Encode returns the file's bytes.
func (f *File) Encode() ([]byte, error) {
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteFile writes the file to path (created or truncated).
func (f *File) WriteFile(path string) error {
	data, err := f.Encode()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadFile reads and validates the safetensors file at path.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read safetensors: %w", err)
	}
	defer fh.Close()
	f, err := Read(fh)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return f, nil
}

// Decode parses and validates a whole safetensors file held in memory.
func Decode(data []byte) (*File, error) {
	return Read(bytes.NewReader(data))
}

// Read reads and validates a safetensors file from r: the header's JSON,
// dtypes, shapes, and data offsets that cover the data section exactly.
// Memory grows only with the bytes actually present, and trailing bytes
// after the data section are an error.
func Read(r io.Reader) (*File, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("safetensors: short file: no 8-byte header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the %d-byte limit (not a safetensors file?)", n, MaxHeaderBytes)
	}
	hj, err := readFull(r, int64(n), "header")
	if err != nil {
		return nil, err
	}
	meta, names, entries, err := parseHeader(hj)
	if err != nil {
		return nil, err
	}
	total, order, err := layout(names, entries)
	if err != nil {
		return nil, err
	}
	data, err := readFull(r, total, "data section")
	if err != nil {
		return nil, err
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k > 0 {
		return nil, fmt.Errorf("safetensors: trailing bytes after the %d-byte data section", total)
	}
	f := &File{Metadata: meta, Tensors: make([]Tensor, len(order))}
	for i, j := range order {
		e := entries[j]
		f.Tensors[i] = Tensor{Name: names[j], DType: e.DType, Shape: e.Shape, Data: data[e.DataOffsets[0]:e.DataOffsets[1]:e.DataOffsets[1]]}
	}
	return f, nil
}

// readFull reads exactly n bytes. The buffer grows as bytes arrive, so a
// header that promises more than the file holds costs no more memory than
// the file.
func readFull(r io.Reader, n int64, what string) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("safetensors: truncated in the %s (%d of %d bytes present)", what, buf.Len(), n)
		}
		return nil, fmt.Errorf("safetensors: reading the %s: %w", what, err)
	}
	return buf.Bytes(), nil
}

// parseHeader decodes the header object, keeping the tensors' order and
// rejecting duplicate keys, unknown fields and malformed records.
func parseHeader(hj []byte) (map[string]string, []string, []entry, error) {
	dec := json.NewDecoder(bytes.NewReader(hj))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, nil, nil, errors.New("safetensors: header is not a JSON object")
	}
	var (
		meta    map[string]string
		names   []string
		entries []entry
		seen    = map[string]bool{}
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("safetensors: header: %w", err)
		}
		key := tok.(string) // object keys are always strings
		if seen[key] {
			return nil, nil, nil, fmt.Errorf("safetensors: header: duplicate key %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, nil, fmt.Errorf("safetensors: header: value of %q: %w", key, err)
		}
		if key == MetadataKey {
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, nil, fmt.Errorf("safetensors: header: %s must map strings to strings: %w", MetadataKey, err)
			}
			continue
		}
		var e entry
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, nil, nil, fmt.Errorf("safetensors: header: tensor %q: %w", key, err)
		}
		if key == "" {
			return nil, nil, nil, errors.New("safetensors: header: empty tensor name")
		}
		if e.Shape == nil {
			return nil, nil, nil, fmt.Errorf("safetensors: header: tensor %q has no shape", key)
		}
		names = append(names, key)
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, nil, fmt.Errorf("safetensors: header: %w", err)
	}
	// Only spaces (the writer's padding) may follow the object.
	if rest := bytes.TrimRight(hj[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, nil, nil, fmt.Errorf("safetensors: header: %d bytes of garbage after the JSON object", len(rest))
	}
	return meta, names, entries, nil
}

// layout checks every tensor's dtype, shape and byte range, and that the
// ranges tile [0, total) without gaps or overlaps. It returns total and the
// tensors' indices in data order.
func layout(names []string, entries []entry) (int64, []int, error) {
	order := make([]int, len(entries))
	for i, e := range entries {
		order[i] = i
		if e.DType.Size() == 0 {
			return 0, nil, fmt.Errorf("safetensors: tensor %s: unknown dtype %q", names[i], e.DType)
		}
		n, err := numElements(e.Shape)
		if err != nil {
			return 0, nil, fmt.Errorf("safetensors: tensor %s: %w", names[i], err)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b {
			return 0, nil, fmt.Errorf("safetensors: tensor %s: data_offsets [%d, %d] are not an ordered range", names[i], b, end)
		}
		if want := n * int64(e.DType.Size()); end-b != want {
			return 0, nil, fmt.Errorf("safetensors: tensor %s: data_offsets [%d, %d] span %d bytes, shape %v of %s needs %d", names[i], b, end, end-b, e.Shape, e.DType, want)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ea, eb := entries[a].DataOffsets, entries[b].DataOffsets
		if ea[0] != eb[0] {
			return compare(ea[0], eb[0])
		}
		return compare(ea[1], eb[1])
	})
	var pos int64
	for _, i := range order {
		e := entries[i].DataOffsets
		if e[0] != pos {
			if e[0] < pos {
				return 0, nil, fmt.Errorf("safetensors: tensor %s: data_offsets [%d, %d] overlap the previous tensor (ending at %d)", names[i], e[0], e[1], pos)
			}
			return 0, nil, fmt.Errorf("safetensors: tensor %s: data_offsets [%d, %d] leave a gap after byte %d", names[i], e[0], e[1], pos)
		}
		pos = e[1]
	}
	return pos, order, nil
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
