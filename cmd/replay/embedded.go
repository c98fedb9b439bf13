package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

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
