package rgc

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestNPYRoundTrip(t *testing.T) {
	cases := []struct {
		name  string
		data  any
		shape []int
		dtype string
		ints  []int64
	}{
		{"int8 2d", []int8{0, 1, -1, 127, -128, 5}, []int{3, 2}, "i1", []int64{0, 1, -1, 127, -128, 5}},
		{"int32", []int32{1, -2, math.MaxInt32}, nil, "i4", []int64{1, -2, math.MaxInt32}},
		{"int64", []int64{0, math.MaxInt64, math.MinInt64}, nil, "i8", []int64{0, math.MaxInt64, math.MinInt64}},
		{"float32", []float32{0.5, -2, 3}, nil, "f4", nil},
		{"float64", []float64{1.25, -1e300, 7}, []int{3}, "f8", nil},
		{"empty", []int64{}, nil, "i8", []int64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteNPY(&buf, tc.data, tc.shape); err != nil {
				t.Fatal(err)
			}
			// The header (magic + length + dict) is padded to 64 bytes.
			hl := int(buf.Bytes()[8]) | int(buf.Bytes()[9])<<8
			if (10+hl)%64 != 0 {
				t.Errorf("header end %d not 64-aligned", 10+hl)
			}
			a, err := ReadNPY(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if a.Dtype != tc.dtype {
				t.Errorf("dtype %s, want %s", a.Dtype, tc.dtype)
			}
			n := reflect.ValueOf(tc.data).Len()
			wantShape := tc.shape
			if wantShape == nil {
				wantShape = []int{n}
			}
			if !reflect.DeepEqual(a.Shape, wantShape) {
				t.Errorf("shape %v, want %v", a.Shape, wantShape)
			}
			f, err := a.Float64s()
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				want := reflect.ValueOf(tc.data).Index(i).Convert(reflect.TypeOf(0.0)).Float()
				if f[i] != want {
					t.Errorf("Float64s()[%d] = %g, want %g", i, f[i], want)
				}
			}
			if tc.ints != nil {
				got, err := a.Int64s()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.ints) {
					t.Errorf("Int64s() = %v, want %v", got, tc.ints)
				}
			}
		})
	}
}

func TestNPYFloatToInt(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNPY(&buf, []float64{3, -4}, nil); err != nil {
		t.Fatal(err)
	}
	a, _ := ReadNPY(bytes.NewReader(buf.Bytes()))
	if got, err := a.Int64s(); err != nil || !reflect.DeepEqual(got, []int64{3, -4}) {
		t.Fatalf("Int64s of whole floats = %v, %v", got, err)
	}
	buf.Reset()
	WriteNPY(&buf, []float32{1.5}, nil)
	a, _ = ReadNPY(bytes.NewReader(buf.Bytes()))
	if _, err := a.Int64s(); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("Int64s of 1.5: err = %v", err)
	}
}

// npyBytes builds a .npy file with an arbitrary header and body.
func npyBytes(header string, body []byte) []byte {
	b := []byte("\x93NUMPY\x01\x00")
	b = append(b, byte(len(header)), byte(len(header)>>8))
	b = append(b, header...)
	return append(b, body...)
}

func TestReadNPYErrors(t *testing.T) {
	eight := make([]byte, 8)
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "reading magic"},
		{"bad magic", []byte("PK\x03\x04xxxxxxxx"), "bad magic"},
		{"version", []byte("\x93NUMPY\x09\x00\x00\x00"), "unsupported format version"},
		{"short header", []byte("\x93NUMPY\x01\x00\x40\x00{'descr'"), "reading 64-byte header"},
		{"not dict", npyBytes("hello", nil), "not a dict"},
		{"unknown key", npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), 'x': 1}", eight), "unknown key"},
		{"missing shape", npyBytes("{'descr': '<i8', 'fortran_order': False}", eight), "lacks"},
		{"big endian", npyBytes("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }", eight), "big-endian"},
		{"object dtype", npyBytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", eight), "unsupported dtype"},
		{"fortran", npyBytes("{'descr': '<i8', 'fortran_order': True, 'shape': (1,), }", eight), "Fortran"},
		{"shape not tuple", npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': 1, }", eight), "not a tuple"},
		{"negative dim", npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (-1,), }", eight), "bad shape"},
		{"huge dims", npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (100000, 100000), }", eight), "too large"},
		{"truncated", npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", eight), "truncated data"},
		{"trailing", npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", append(eight, 1)), "trailing bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadNPY(bytes.NewReader(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteNPYErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNPY(&buf, []string{"a"}, nil); err == nil {
		t.Error("WriteNPY([]string) succeeded")
	}
	if err := WriteNPY(&buf, []int64{1, 2, 3}, []int{2, 2}); err == nil || !strings.Contains(err.Error(), "holds 4 elements, data has 3") {
		t.Errorf("shape mismatch: err = %v", err)
	}
}

func FuzzReadNPY(f *testing.F) {
	for _, d := range []any{[]int8{0, 1, 1, 0}, []int64{5, 6}, []float32{1}, []float64{}, []int32{7}} {
		var buf bytes.Buffer
		WriteNPY(&buf, d, nil)
		f.Add(buf.Bytes())
	}
	var buf bytes.Buffer
	WriteNPY(&buf, []int8{0, 1, 1, 0, 1, 0, 0, 1}, []int{2, 4})
	f.Add(buf.Bytes())
	f.Add(npyBytes("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }", []byte{255, 255, 255, 255, 255, 255, 255, 255}))
	f.Add(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", make([]byte, 8)))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ReadNPY(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(a.Data) != a.Len()*dtypeSize(a.Dtype) {
			t.Fatalf("accepted %d data bytes for shape %v of %s", len(a.Data), a.Shape, a.Dtype)
		}
		fl, err := a.Float64s()
		if err != nil || len(fl) != a.Len() {
			t.Fatalf("Float64s: %d values, %v", len(fl), err)
		}
		a.Int64s()
	})
}
