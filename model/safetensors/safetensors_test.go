package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// build returns a file of the header JSON hj (unpadded) followed by data.
func build(hj string, data []byte) []byte {
	var b bytes.Buffer
	var pre [8]byte
	binary.LittleEndian.PutUint64(pre[:], uint64(len(hj)))
	b.Write(pre[:])
	b.WriteString(hj)
	b.Write(data)
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	f := &File{
		Metadata: map[string]string{"format": "pt", "note": "x"},
		Tensors: []Tensor{
			FromFloat32("a.weight", []int{2, 3}, []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0}),
			FromInt64("a.count", []int{}, []int64{-7}),
			FromFloat32("empty", []int{0, 4}, nil),
			{Name: "h", DType: F16, Shape: []int{3}, Data: []byte{0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00}},
		},
	}
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	hlen := binary.LittleEndian.Uint64(data)
	if hlen%8 != 0 {
		t.Fatalf("header length %d not padded to 8", hlen)
	}
	g, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Names(), f.Names()) {
		t.Fatalf("names %v, want %v", g.Names(), f.Names())
	}
	for i := range f.Tensors {
		a, b := f.Tensors[i], g.Tensors[i]
		if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("tensor %s changed: %+v -> %+v", a.Name, a, b)
		}
	}
	if g.Metadata["format"] != "pt" || g.Metadata["note"] != "x" {
		t.Fatalf("metadata %v", g.Metadata)
	}
	v, err := g.Tensor("a.weight").Float32s()
	if err != nil || v[2] != 3.5 || !math.IsInf(float64(v[3]), 1) {
		t.Fatalf("a.weight = %v, %v", v, err)
	}
	h, err := g.Tensor("h").Float32s()
	if err != nil || h[0] != 1 || h[1] != -2 || h[2] != float32(math.Ldexp(1, -24)) {
		t.Fatalf("f16 = %v, %v (want 1, -2, 2^-24)", h, err)
	}
	c, err := g.Tensor("a.count").Int64s()
	if err != nil || len(c) != 1 || c[0] != -7 {
		t.Fatalf("scalar = %v, %v", c, err)
	}
}

// TestHandWritten parses a file written byte by byte per the format, with
// data in a different order than the header's keys (as other writers do).
func TestHandWritten(t *testing.T) {
	data := make([]byte, 0, 24)
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(0.1)) // "b": F64 [1] at 0..8
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(2))   // "a": F32 [2] at 8..16
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(-3))
	data = binary.LittleEndian.AppendUint16(data, 0x3f80) // "c": BF16 [1] = 1.0
	hj := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"__metadata__":{"k":"v"},"b":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"c":{"dtype":"BF16","shape":[1,1],"data_offsets":[16,18]}}  `
	f, err := Decode(build(hj, data))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Fatalf("data order %v, want [b a c]", got)
	}
	for _, tc := range []struct {
		name string
		want []float32
	}{{"a", []float32{2, -3}}, {"b", []float32{0.1}}, {"c", []float32{1}}} {
		v, err := f.Tensor(tc.name).Float32s()
		if err != nil || !slices.Equal(v, tc.want) {
			t.Errorf("%s = %v, %v; want %v", tc.name, v, err, tc.want)
		}
	}
}

func TestInvalid(t *testing.T) {
	f32 := func(off0, off1 int) string {
		return `{"dtype":"F32","shape":[2],"data_offsets":[` + itoa(off0) + `,` + itoa(off1) + `]}`
	}
	d8 := make([]byte, 8)
	d16 := make([]byte, 16)
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "short file"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds"},
		{"truncated header", binary.LittleEndian.AppendUint64(nil, 50), "truncated in the header"},
		{"not object", build(`[1]`, nil), "not a JSON object"},
		{"bad json", build(`{"a":`, nil), "header"},
		{"garbage after", build(`{}x`, nil), "garbage"},
		{"duplicate", build(`{"a":`+f32(0, 8)+`,"a":`+f32(8, 16)+`}`, d16), "duplicate key"},
		{"unknown dtype", build(`{"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}`, d8), "unknown dtype"},
		{"unknown field", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, d8), "unknown field"},
		{"no shape", build(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, d8), "no shape"},
		{"negative dim", build(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, d8), "negative dimension"},
		{"size mismatch", build(`{"a":`+f32(0, 12)+`}`, make([]byte, 12)), "needs 8"},
		{"reversed", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, nil), "ordered range"},
		{"gap", build(`{"a":`+f32(4, 12)+`}`, make([]byte, 12)), "gap"},
		{"overlap", build(`{"a":`+f32(0, 8)+`,"b":`+f32(4, 12)+`}`, make([]byte, 12)), "overlap"},
		{"truncated data", build(`{"a":`+f32(0, 8)+`}`, make([]byte, 5)), "truncated in the data"},
		{"trailing", build(`{"a":`+f32(0, 8)+`}`, make([]byte, 9)), "trailing bytes"},
		{"bad metadata", build(`{"__metadata__":{"k":1}}`, nil), "strings to strings"},
		{"overflow shape", build(`{"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}}`, d8), "too many elements"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	cases := []struct {
		name string
		f    File
		want string
	}{
		{"dup", File{Tensors: []Tensor{FromInt64("a", []int{1}, []int64{1}), FromInt64("a", []int{1}, []int64{2})}}, "duplicate"},
		{"metadata name", File{Tensors: []Tensor{FromInt64(MetadataKey, []int{1}, []int64{1})}}, "invalid tensor name"},
		{"short data", File{Tensors: []Tensor{{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 4)}}}, "needs 8"},
		{"dtype", File{Tensors: []Tensor{{Name: "a", DType: "X", Shape: []int{0}}}}, "unknown dtype"},
	}
	for _, tc := range cases {
		if _, err := tc.f.Encode(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestConversionErrors(t *testing.T) {
	big := FromInt64("x", []int{1}, []int64{0})
	big.DType = F64
	binary.LittleEndian.PutUint64(big.Data, math.Float64bits(1e300))
	if _, err := big.Float32s(); err == nil || !strings.Contains(err.Error(), "overflows float32") {
		t.Errorf("F64 1e300: %v", err)
	}
	i := FromInt64("i", []int{1}, []int64{3})
	if _, err := i.Float32s(); err == nil {
		t.Error("I64 as float: no error")
	}
	f := FromFloat32("f", []int{1}, []float32{1})
	if _, err := f.Int64s(); err == nil {
		t.Error("F32 as int: no error")
	}
	u := Tensor{Name: "u", DType: U64, Shape: []int{1}, Data: binary.LittleEndian.AppendUint64(nil, math.MaxUint64)}
	if _, err := u.Int64s(); err == nil || !strings.Contains(err.Error(), "overflows int64") {
		t.Errorf("U64 max: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// FuzzDecode checks that arbitrary input never panics and that whatever
// decodes re-encodes to a file that decodes to the same tensors.
func FuzzDecode(f *testing.F) {
	seed, _ := (&File{Metadata: map[string]string{"a": "b"}, Tensors: []Tensor{
		FromFloat32("w", []int{2}, []float32{1, 2}), FromInt64("n", []int{}, []int64{3}),
	}}).Encode()
	f.Add(seed)
	f.Add(build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Decode(data)
		if err != nil {
			return
		}
		out, err := g.Encode()
		if err != nil {
			t.Fatalf("decoded file does not re-encode: %v", err)
		}
		h, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded file does not decode: %v", err)
		}
		if len(h.Tensors) != len(g.Tensors) {
			t.Fatalf("%d tensors after re-encoding, want %d", len(h.Tensors), len(g.Tensors))
		}
		for i := range g.Tensors {
			a, b := g.Tensors[i], h.Tensors[i]
			if a.Name != b.Name || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
				t.Fatalf("tensor %d changed on re-encoding", i)
			}
		}
	})
}
