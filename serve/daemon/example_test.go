package daemon_test

import (
	"fmt"
	"log"
	"time"

	"rgcpred/rgc"
	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// soon is a stand-in for the model: every window gets all its probability
// on class 9, "the next spike falls 10 bins after the window".
type soon struct{}

func (soon) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Cells {
		p := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(p)
		p[9] = 1
	}
	return nil
}

// printer is a Sink that prints every decision.
type printer struct{}

func (printer) Decisions(t int64, ds []stream.Decision) {
	for _, d := range ds {
		fmt.Printf("frame %d: cell %d spikes at bin %d (p = %.2f)\n", t, d.Cell, d.Bin, d.Prob)
	}
}
func (printer) Batch(int, time.Duration) {}
func (printer) Stream(ev stream.Event) {
	fmt.Printf("stream epoch %d starts at frame %d\n", ev.Epoch, ev.First)
}

// ExampleCore feeds a Core the stimulus frames of a device, as predictord's
// service does with the frames it receives over NATS. The first window of
// a cell ends at the stream's bin 1023, once 1024 frames have arrived;
// after a predicted spike at bin t+k+1 the cell's next window ends there,
// with that spike in its history (the autoregressive rollout).
func ExampleCore() {
	c, err := daemon.New(soon{}, printer{}, daemon.Config{Known: []int{3, 7}, Cells: []int{7}})
	if err != nil {
		log.Fatal(err)
	}
	// Frames 0..1043 in messages of 100, every LED at half intensity.
	for first := int64(0); first <= 1043; first += 100 {
		f := &stream.Frames{FirstSeq: first}
		for seq := first; seq < min(first+100, 1044); seq++ {
			f.Frames = append(f.Frames, stream.Frame{Time: seq * int64(time.Millisecond), LED: [rgc.StimChannels]float32{0.5, 0.5, 0.5, 0.5}})
		}
		c.Frames(f, 0)
	}
	fmt.Println("windows predicted:", c.Stats().Predictions)
	// Output:
	// stream epoch 1 starts at frame 0
	// frame 1023: cell 7 spikes at bin 1033 (p = 1.00)
	// frame 1033: cell 7 spikes at bin 1043 (p = 1.00)
	// frame 1043: cell 7 spikes at bin 1053 (p = 1.00)
	// windows predicted: 3
}
