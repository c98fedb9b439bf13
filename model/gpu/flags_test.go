package gpu

import (
	"flag"
	"testing"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		cuda    bool
		wantErr bool
		want    Options
	}{
		{nil, false, false, Options{MaxBatch: 8, Precision: FP32}},
		{[]string{"--backend", "cuda", "--gpu", "1", "--cuda-lib", "/x:/y", "--gpu-precision", "tf32"}, true, false,
			Options{MaxBatch: 8, Device: 1, LibDirs: "/x:/y", Precision: TF32}},
		{[]string{"--backend", "rocm"}, false, true, Options{}},
		{[]string{"--backend", "cuda", "--gpu-precision", "bf16"}, true, true, Options{}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cuda, err := f.CUDA()
		var o Options
		if err == nil {
			o, err = f.Options(8)
		}
		if (err != nil) != tc.wantErr {
			t.Errorf("%v: error %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && (cuda != tc.cuda || o != tc.want) {
			t.Errorf("%v: cuda %v, options %+v; want %v, %+v", tc.args, cuda, o, tc.cuda, tc.want)
		}
	}
}
