package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/serve/embednats"
	"rgcpred/serve/service"
)

// startEmbedded starts an embedded NATS server on loopback and, on it, the
// daemon service predictord runs, serving the replayed cells on o.device
// with silence decisions published. It returns the server's URL and a stop
// function that drains the daemon and shuts the server down.
func startEmbedded(ctx context.Context, o *options, cells []int, load service.Loader) (url string, stop func(), err error) {
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		return "", nil, err
	}
	svc, err := service.New(service.Config{
		Devices:        []string{o.device},
		ModelPath:      o.ckpt,
		Load:           load,
		Cells:          cells,
		MaxLag:         40, // predictord's default --max-lag
		Stagger:        o.stagger,
		StimMode:       o.stim,
		PublishSilence: true,
		Log:            zerolog.Nop(),
	})
	if err != nil {
		srv.Shutdown()
		return "", nil, fmt.Errorf("embedded daemon: %w", err)
	}
	nc, err := nats.Connect(srv.ClientURL(), svc.ConnOptions()...)
	if err != nil {
		srv.Shutdown()
		return "", nil, fmt.Errorf("embedded daemon: connect: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(sctx, nc) }()
	stop = func() {
		cancel()
		<-done
		nc.Close()
		srv.Shutdown()
	}
	for deadline := time.Now().Add(10 * time.Second); !svc.Ready(); {
		select {
		case err := <-done:
			cancel()
			nc.Close()
			srv.Shutdown()
			return "", nil, fmt.Errorf("embedded daemon stopped: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("embedded daemon not ready after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return srv.ClientURL(), stop, nil
}

// oracleModel serves the exact oracle of the synthetic recording in dir
// (rgc/synth): the daemon passes each window's end bin as the frame
// sequence number, which the replay makes the recording bin, so the oracle
// sees the bins it expects, binned in stimulus mode mode.
func oracleModel(dir string, mode rgc.StimMode) (*service.Model, error) {
	o, err := synth.OracleFromDir(dir)
	if err != nil {
		return nil, err
	}
	o.SetStimMode(mode)
	rec, err := rgc.Load(dir)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, id := range rec.ClusterIDs() {
		if _, ok := o.CellIndex(id); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("oracle of %s knows none of its cells", dir)
	}
	return &service.Model{Predictor: &probedOracle{o: o}, Cells: ids, Name: "synthetic oracle", StimMode: mode}, nil
}

// probedOracle lets the oracle pass the daemon's load probe. The service
// checks a model by predicting one window with no stimulus at all (every
// LED row zero); the oracle refuses any window whose stimulus is not its
// recording's at the window's end bin. A window whose four LED rows are all
// zero, which a synthetic recording's stimulus never produces over 1024
// bins, gets the "no spike" class with certainty; every other window goes
// to the oracle unchanged, including its stimulus check.
type probedOracle struct{ o *synth.Oracle }

func (p *probedOracle) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		w := b.Inputs[i*rgc.WindowLen : i*rgc.WindowLen+rgc.SpikeRow*rgc.WindowBins]
		if !allZero(w) {
			continue
		}
		if b.Len() != 1 {
			return fmt.Errorf("oracle: window %d of %d has no stimulus", i, b.Len())
		}
		o := out[:rgc.NumClasses]
		clear(o)
		o[rgc.NoSpikeClass] = 1
		return nil
	}
	return p.o.Predict(b, out)
}

func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}
