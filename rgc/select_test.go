package rgc

import (
	"slices"
	"testing"
)

func TestSelectCells(t *testing.T) {
	r := handRecording(2000, []int32{3, 3, 10}, nil, []int32{1999}) // ids 100-102; 100 and 102 quality
	noQuality := handRecording(2000, []int32{3})
	noQuality.Cells[0].Quality = false
	for _, tc := range []struct {
		rec  *Recording
		spec string
		want []int // indices; nil: an error
	}{
		{r, "quality", []int{0, 2}},
		{r, "all", []int{0, 1, 2}},
		{r, " 102 ,101", []int{2, 1}},
		{r, "100", []int{0}},
		{r, "1,,2", nil},
		{r, "x", nil},
		{r, "99999", nil},
		{r, "", nil},
		{noQuality, "quality", nil},
	} {
		got, err := tc.rec.SelectCells(tc.spec)
		if tc.want == nil {
			if err == nil {
				t.Errorf("SelectCells(%q) = %v, want an error", tc.spec, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SelectCells(%q) = %v, %v; want %v", tc.spec, got, err, tc.want)
		}
	}
}
