package main

import (
	"slices"
	"testing"
)

func TestParseCounts(t *testing.T) {
	got, err := parseCounts("60, 1,5,5,120")
	if err != nil || !slices.Equal(got, []int{1, 5, 60, 120}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-3", "1,x", "1,,2"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
