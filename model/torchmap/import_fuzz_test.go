package torchmap

import (
	"math"
	"slices"
	"testing"

	"rgcpred/model/safetensors"
)

// FuzzImport: a safetensors file from elsewhere (PyTorch, a download),
// whatever its bytes, is refused with an error or imported into a
// checkpoint that validates and exports back to a file importing to the
// same tensors bit for bit. Seeds: exports of small random checkpoints,
// with and without rgcpred's metadata, and broken edits of them.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"gpt-a-cat-cpu", "gpt-b-logmix-cpu"} {
		ck := randomCheckpoint(f, name, 2, 5)
		ours, err := Export(ck)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := Import(roundTrip(f, ours), Options{}); err != nil {
			f.Fatalf("%s: the seed does not import: %v", name, err)
		}
		for _, file := range []*safetensors.File{ours, pytorchStyle(f, ck)} {
			b, err := file.Encode()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
			f.Add(b[:len(b)/2])
			file.Tensors = file.Tensors[1:]
			if b, err = file.Encode(); err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":{}}        "))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := safetensors.Decode(data)
		if err != nil {
			return
		}
		for _, opt := range []Options{{}, {CellIDs: []int{7, 9}}} {
			ck, err := Import(file, opt)
			if err != nil {
				continue
			}
			if err := ck.Validate(); err != nil {
				t.Fatalf("imported a checkpoint that does not validate: %v", err)
			}
			out, err := Export(ck)
			if err != nil {
				t.Fatalf("imported checkpoint does not export: %v", err)
			}
			back, err := Import(roundTrip(t, out), Options{})
			if err != nil {
				t.Fatalf("exported import does not import: %v", err)
			}
			for name, v := range ck.Weights.Tensors {
				w := back.Weights.Tensors[name]
				if !slices.EqualFunc(v, w, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Fatalf("tensor %s changed through export and import", name)
				}
			}
		}
	})
}
