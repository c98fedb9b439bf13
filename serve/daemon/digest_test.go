package daemon

import (
	"reflect"
	"testing"

	"rgcpred/rgc/fakepred"
)

// TestSnapshotDigest: equal snapshots digest the same, and a change to any
// field (every field of Snapshot, found by reflection, so that a field
// added later must be digested too) changes the digest.
func TestSnapshotDigest(t *testing.T) {
	cells := []int{1, 2, 3}
	core, err := New(fakepred.New(cells), &countSink{}, Config{Known: cells, Cells: cells, PublishSilence: true})
	if err != nil {
		t.Fatal(err)
	}
	core.Frames(synthFrames(0, 1100), 0)
	base := core.Snapshot()
	if base.Digest() != core.Snapshot().Digest() {
		t.Fatal("two snapshots of one state digest differently")
	}
	typ := reflect.TypeOf(*base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			s := core.Snapshot()
			if !perturb(reflect.ValueOf(s).Elem().Field(i)) {
				t.Fatalf("field %s of kind %v: the test cannot change it", f.Name, f.Type.Kind())
			}
			if s.Digest() == base.Digest() {
				t.Fatalf("a change to %s leaves the digest unchanged", f.Name)
			}
		})
	}
}

// perturb changes v (a field of a snapshot) and reports whether it could.
func perturb(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(v.Int() + 1)
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32:
		v.SetFloat(v.Float() + 0.25)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
			return true
		}
		return perturb(v.Elem())
	case reflect.Array:
		return perturb(v.Index(0))
	case reflect.Slice:
		if v.Len() > 0 && perturb(v.Index(0)) {
			return true
		}
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case reflect.Struct:
		for i := range v.NumField() {
			if perturb(v.Field(i)) {
				return true
			}
		}
		return false
	default:
		return false
	}
	return true
}
