package rgc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// NPY is an array read from a NumPy .npy file (format versions 1.0, 2.0 and
// 3.0, C order). Data holds the raw little-endian element bytes; use the
// accessors to get typed values.
type NPY struct {
	// Dtype is the element type in NumPy's notation without byte order:
	// "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8" or "b1".
	Dtype string
	// Shape is the array's shape; an empty shape is a scalar (one element).
	Shape []int
	// Data is the element bytes, little-endian, C order.
	Data []byte
}

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// maxNPYElements bounds the element count accepted from a header, so a
// corrupted header cannot make the reader allocate unbounded memory.
const maxNPYElements = 1 << 31

// dtypeSize returns the element size of a byte-order-free dtype, or 0 when
// the dtype is not supported.
func dtypeSize(d string) int {
	switch d {
	case "i1", "u1", "b1":
		return 1
	case "i2", "u2":
		return 2
	case "i4", "u4", "f4":
		return 4
	case "i8", "u8", "f8":
		return 8
	}
	return 0
}

// Len returns the number of elements (the product of Shape).
func (a *NPY) Len() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// ReadNPY reads one array in .npy format. Only little-endian (or
// byte-order-free) numeric dtypes in C order are accepted; a truncated body,
// a malformed header or an unsupported dtype is an error.
func ReadNPY(r io.Reader) (*NPY, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("npy: reading magic: %w", err)
	}
	if string(pre[:6]) != npyMagic {
		return nil, errors.New("npy: not a .npy file (bad magic)")
	}
	major := pre[6]
	var hlen int
	switch major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", err)
		}
		v := binary.LittleEndian.Uint32(b[:])
		if v > 1<<20 {
			return nil, fmt.Errorf("npy: header length %d too large", v)
		}
		hlen = int(v)
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d.%d", major, pre[7])
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("npy: reading %d-byte header: %w", hlen, err)
	}
	a, err := parseNPYHeader(string(hdr))
	if err != nil {
		return nil, err
	}
	n := a.Len()
	size := dtypeSize(a.Dtype)
	nbytes := n * size
	// Read in bounded chunks so a lying header does not force a huge
	// allocation before the body turns out to be short.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(nbytes)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("npy: truncated data: header promises %d elements of %s (%d bytes), file has %d", n, a.Dtype, nbytes, buf.Len())
		}
		return nil, fmt.Errorf("npy: reading data: %w", err)
	}
	a.Data = buf.Bytes()
	var extra [1]byte
	if k, _ := r.Read(extra[:]); k > 0 {
		return nil, fmt.Errorf("npy: trailing bytes after %d elements of %s", n, a.Dtype)
	}
	return a, nil
}

// parseNPYHeader parses the Python dict literal of a .npy header, e.g.
// {'descr': '<i8', 'fortran_order': False, 'shape': (155,), }.
func parseNPYHeader(h string) (*NPY, error) {
	s := strings.TrimSpace(h)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return nil, fmt.Errorf("npy: header %q is not a dict", clip(h))
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	var descr, order, shape string
	var haveDescr, haveOrder, haveShape bool
	for len(s) > 0 {
		key, rest, ok := pyString(s)
		if !ok {
			return nil, fmt.Errorf("npy: header %q: expected a quoted key", clip(h))
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, ":") {
			return nil, fmt.Errorf("npy: header %q: missing ':' after %q", clip(h), key)
		}
		rest = strings.TrimSpace(rest[1:])
		var val string
		switch {
		case strings.HasPrefix(rest, "'") || strings.HasPrefix(rest, "\""):
			v, r2, ok := pyString(rest)
			if !ok {
				return nil, fmt.Errorf("npy: header %q: bad string value for %q", clip(h), key)
			}
			val, rest = v, r2
		case strings.HasPrefix(rest, "("):
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				return nil, fmt.Errorf("npy: header %q: unterminated tuple", clip(h))
			}
			val, rest = rest[:end+1], rest[end+1:]
		default:
			end := strings.IndexAny(rest, ",}")
			if end < 0 {
				end = len(rest)
			}
			val, rest = strings.TrimSpace(rest[:end]), rest[end:]
		}
		switch key {
		case "descr":
			descr, haveDescr = val, true
		case "fortran_order":
			order, haveOrder = val, true
		case "shape":
			shape, haveShape = val, true
		default:
			return nil, fmt.Errorf("npy: header %q: unknown key %q", clip(h), key)
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, ",") {
			rest = strings.TrimSpace(rest[1:])
		} else if rest != "" {
			return nil, fmt.Errorf("npy: header %q: expected ',' after %q", clip(h), key)
		}
		s = rest
	}
	if !haveDescr || !haveOrder || !haveShape {
		return nil, fmt.Errorf("npy: header %q lacks descr, fortran_order or shape", clip(h))
	}
	a := &NPY{}
	if len(descr) < 2 {
		return nil, fmt.Errorf("npy: unsupported dtype %q", descr)
	}
	switch descr[0] {
	case '<', '|', '=':
		a.Dtype = descr[1:]
	case '>':
		if dtypeSize(descr[1:]) == 1 {
			a.Dtype = descr[1:]
		} else {
			return nil, fmt.Errorf("npy: big-endian dtype %q not supported", descr)
		}
	default:
		a.Dtype = descr
	}
	if dtypeSize(a.Dtype) == 0 {
		return nil, fmt.Errorf("npy: unsupported dtype %q", descr)
	}
	switch order {
	case "False":
	case "True":
		return nil, errors.New("npy: Fortran-order arrays not supported")
	default:
		return nil, fmt.Errorf("npy: bad fortran_order %q", order)
	}
	if len(shape) < 2 || shape[0] != '(' || shape[len(shape)-1] != ')' {
		return nil, fmt.Errorf("npy: shape %q is not a tuple", shape)
	}
	inner := strings.TrimSpace(shape[1 : len(shape)-1])
	total := 1
	if inner != "" {
		for _, f := range strings.Split(inner, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			d, err := strconv.Atoi(f)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("npy: bad shape %s", shape)
			}
			if d > 0 && total > maxNPYElements/d {
				return nil, fmt.Errorf("npy: shape %s too large", shape)
			}
			total *= d
			a.Shape = append(a.Shape, d)
		}
		if len(a.Shape) == 0 {
			return nil, fmt.Errorf("npy: bad shape %s", shape)
		}
	}
	if a.Shape == nil {
		a.Shape = []int{}
	}
	return a, nil
}

// pyString parses a leading single- or double-quoted Python string without
// escapes and returns its content and the rest.
func pyString(s string) (val, rest string, ok bool) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') {
		return "", s, false
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 {
		return "", s, false
	}
	return s[1 : 1+end], s[2+end:], true
}

// clip shortens a header for error messages.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// at returns element i converted to float64 and, for integer dtypes, to int64
// exactly (isInt reports which is exact).
func (a *NPY) at(i int) (f float64, n int64, isInt bool) {
	d := a.Data
	switch a.Dtype {
	case "i1":
		v := int64(int8(d[i]))
		return float64(v), v, true
	case "u1", "b1":
		v := int64(d[i])
		return float64(v), v, true
	case "i2":
		v := int64(int16(binary.LittleEndian.Uint16(d[2*i:])))
		return float64(v), v, true
	case "u2":
		v := int64(binary.LittleEndian.Uint16(d[2*i:]))
		return float64(v), v, true
	case "i4":
		v := int64(int32(binary.LittleEndian.Uint32(d[4*i:])))
		return float64(v), v, true
	case "u4":
		v := int64(binary.LittleEndian.Uint32(d[4*i:]))
		return float64(v), v, true
	case "i8":
		v := int64(binary.LittleEndian.Uint64(d[8*i:]))
		return float64(v), v, true
	case "u8":
		u := binary.LittleEndian.Uint64(d[8*i:])
		return float64(u), int64(u), u <= math.MaxInt64
	case "f4":
		v := float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])))
		return v, int64(v), false
	case "f8":
		v := math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
		return v, int64(v), false
	}
	return 0, 0, false
}

// checkData reports whether Data matches Dtype and Shape.
func (a *NPY) checkData() error {
	size := dtypeSize(a.Dtype)
	if size == 0 {
		return fmt.Errorf("npy: unsupported dtype %q", a.Dtype)
	}
	if len(a.Data) != a.Len()*size {
		return fmt.Errorf("npy: %d data bytes for %d elements of %s", len(a.Data), a.Len(), a.Dtype)
	}
	return nil
}

// Int64s returns the elements as int64. Integer dtypes convert exactly;
// float elements must be finite whole numbers within int64 range.
func (a *NPY) Int64s() ([]int64, error) {
	if err := a.checkData(); err != nil {
		return nil, err
	}
	out := make([]int64, a.Len())
	for i := range out {
		f, n, isInt := a.at(i)
		if !isInt {
			if a.Dtype == "u8" {
				return nil, fmt.Errorf("npy: element %d (%d) overflows int64", i, uint64(n))
			}
			if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f < -9.2e18 || f > 9.2e18 {
				return nil, fmt.Errorf("npy: element %d (%g) is not an integer", i, f)
			}
		}
		out[i] = n
	}
	return out, nil
}

// Float64s returns the elements converted to float64, whatever the numeric
// dtype.
func (a *NPY) Float64s() ([]float64, error) {
	if err := a.checkData(); err != nil {
		return nil, err
	}
	out := make([]float64, a.Len())
	for i := range out {
		out[i], _, _ = a.at(i)
	}
	return out, nil
}

// WriteNPY writes data as a version 1.0 .npy array of the given shape.
// data is one of []int8, []int32, []int64, []float32 or []float64, and its
// length must equal the product of shape (a nil shape means one dimension of
// len(data)).
func WriteNPY(w io.Writer, data any, shape []int) error {
	var descr string
	var n int
	switch d := data.(type) {
	case []int8:
		descr, n = "|i1", len(d)
	case []int32:
		descr, n = "<i4", len(d)
	case []int64:
		descr, n = "<i8", len(d)
	case []float32:
		descr, n = "<f4", len(d)
	case []float64:
		descr, n = "<f8", len(d)
	default:
		return fmt.Errorf("npy: cannot write %T", data)
	}
	if shape == nil {
		shape = []int{n}
	}
	total := 1
	for _, s := range shape {
		if s < 0 {
			return fmt.Errorf("npy: negative dimension in shape %v", shape)
		}
		total *= s
	}
	if total != n {
		return fmt.Errorf("npy: shape %v holds %d elements, data has %d", shape, total, n)
	}
	var sb strings.Builder
	sb.WriteString("(")
	for i, s := range shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(s))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString(")")
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sb.String())
	// Pad with spaces and a newline so magic+len+header is a multiple of 64.
	total = 10 + len(hdr) + 1
	if pad := (64 - total%64) % 64; pad > 0 {
		hdr += strings.Repeat(" ", pad)
	}
	hdr += "\n"
	if len(hdr) > math.MaxUint16 {
		return errors.New("npy: header too long")
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(npyMagic)
	bw.Write([]byte{1, 0})
	var l [2]byte
	binary.LittleEndian.PutUint16(l[:], uint16(len(hdr)))
	bw.Write(l[:])
	bw.WriteString(hdr)
	var err error
	switch d := data.(type) {
	case []int8:
		err = binary.Write(bw, binary.LittleEndian, d)
	case []int32:
		err = binary.Write(bw, binary.LittleEndian, d)
	case []int64:
		err = binary.Write(bw, binary.LittleEndian, d)
	case []float32:
		err = binary.Write(bw, binary.LittleEndian, d)
	case []float64:
		err = binary.Write(bw, binary.LittleEndian, d)
	}
	if err != nil {
		return fmt.Errorf("npy: writing data: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("npy: writing: %w", err)
	}
	return nil
}
