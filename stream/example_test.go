package stream_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/rgc"
	"rgcpred/serve/embednats"
	"rgcpred/serve/service"
	"rgcpred/stream"
)

// tenBins is a stand-in for a model: every window gets all its probability
// on class 9, "the next spike falls 10 bins after the window's end".
type tenBins struct{}

func (tenBins) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		p := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(p)
		p[9] = 1
	}
	return nil
}

// startDaemon starts an embedded NATS server and, on it, the daemon
// service predictord runs, serving cells 17 and 42 on device dev0 with
// tenBins. It returns the server's URL and a function that stops both.
func startDaemon() (url string, stop func()) {
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		log.Fatal(err)
	}
	load := func(string, int) (*service.Model, error) {
		return &service.Model{Predictor: tenBins{}, Cells: []int{17, 42}, Name: "ten bins", StimMode: rgc.StimCausal}, nil
	}
	svc, err := service.New(service.Config{Devices: []string{"dev0"}, Load: load, StimMode: rgc.StimCausal, Log: zerolog.Nop()})
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), svc.ConnOptions()...)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, nc) }()
	for !svc.Ready() {
		time.Sleep(5 * time.Millisecond)
	}
	return srv.ClientURL(), func() {
		cancel()
		<-done
		nc.Close()
		srv.Shutdown()
	}
}

// Example is a device: it connects to the daemon's NATS server, sends
// its cells' spike histories and a window's worth of stimulus frames, and
// receives the decisions. The daemon here is predictord's service with a
// stand-in model, on an embedded server; a real device connects to
// predictord's --nats-url the same way.
func Example() {
	url, stop := startDaemon()
	defer stop()

	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	dev, err := stream.NewPublisher(nc, "dev0")
	if err != nil {
		log.Fatal(err)
	}
	got, err := dev.Collect() // the decisions on rgc.dev0.spikes
	if err != nil {
		log.Fatal(err)
	}
	defer got.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dev.Flush(ctx); err != nil { // the subscription is in place
		log.Fatal(err)
	}

	// Cell 17 spiked 5 bins before the stream starts; cell 42 was silent.
	var h17 stream.History
	h17.Cell = 17
	h17.Spikes[rgc.WindowBins-5] = true
	if err := dev.SendHistory([]stream.History{h17, {Cell: 42}}); err != nil {
		log.Fatal(err)
	}

	// Frames 0..1023, the first window: both cells' first windows end at
	// frame 1023 (the daemon staggers starts only with --stagger).
	f := &stream.Frames{FirstSeq: 0, Frames: make([]stream.Frame, rgc.WindowBins)}
	for i := range f.Frames {
		f.Frames[i].Time = int64(float64(i) * float64(time.Second) / rgc.BinRateHz) // the device clock, echoed
		f.Frames[i].LED = [rgc.StimChannels]float32{0.5, 0.5, 0.5, 0.5}
	}
	if err := dev.PublishFrames(f); err != nil {
		log.Fatal(err)
	}

	if err := got.WaitFor(ctx, func(ds []stream.Decision) bool { return len(ds) == 2 }); err != nil {
		log.Fatal(err)
	}
	for _, d := range got.Decisions() {
		fmt.Printf("cell %d: window ending at frame %d, spike at frame %d (p = %.2f)\n", d.Cell, d.End, d.Bin, d.Prob)
	}
	// Output:
	// cell 17: window ending at frame 1023, spike at frame 1033 (p = 1.00)
	// cell 42: window ending at frame 1023, spike at frame 1033 (p = 1.00)
}
