package model

import "testing"

// TestFLOPs checks the count against the layers written out by hand for
// the paper's gpt-a-cat (section 2's sizes), and its ordering across
// configurations.
func TestFLOPs(t *testing.T) {
	c, err := NewConfig(StemGPTA, HeadCat, CNNPaper, 60)
	if err != nil {
		t.Fatal(err)
	}
	// Stem: 512 positions, conv1 5->16 k21, conv2 16->16 k21.
	stem := 512*5*21*16 + 512*16*21*16
	// Blocks (in, lIn, lOut): (16, 512, 256), (64, 256, 128), (64, 128, 64),
	// (64, 64, 64); mid 128, out 64, k7, SE 64->16->64; shortcuts on the
	// first three.
	blocks := 0
	for _, b := range []struct{ in, lIn, lOut int }{{16, 512, 256}, {64, 256, 128}, {64, 128, 64}, {64, 64, 64}} {
		blocks += b.lIn*b.in*128 + b.lOut*128*7*128 + b.lOut*128*64 + 2*64*16
		if b.lIn != b.lOut || b.in != 64 {
			blocks += b.lOut * b.in * 64
		}
	}
	// gpt-a: width 64, 64 tokens, 2 layers; the second for the last token.
	layer1 := 64*64*192 + 2*(64*65/2)*64 + 64*64*64 + 64*64*256*2
	layer2 := 64*64*192 + 2*64*64 + 64*64 + 64*256*2
	head := 64 * 81
	want := int64(2 * (stem + blocks + layer1 + layer2 + head))
	if got := c.FLOPs(); got != want {
		t.Errorf("gpt-a-cat: %d FLOPs, want %d", got, want)
	}
	order := []string{"gpt-a-cat-cpu", "gpt-a-cat", "gpt-b-cat"}
	var prev int64
	for _, name := range order {
		c, err := ParseConfigName(name, 60)
		if err != nil {
			t.Fatal(err)
		}
		f := c.FLOPs()
		if f <= prev {
			t.Errorf("%s: %d FLOPs, not above the previous configuration's %d", name, f, prev)
		}
		t.Logf("%s: %.1f MFLOP per window", name, float64(f)/1e6)
		prev = f
	}
}
