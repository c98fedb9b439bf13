package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/nats-io/nats.go"
)

// ErrAborted is returned by Serve when a second termination signal cut the
// drain short.
var ErrAborted = errors.New("service: second signal while draining: exited without finishing the drain")

// Serve runs the service on nc (Run) under the process's signals, read
// from sigs: SIGHUP reloads the checkpoint while serving (Reload; ignored
// while draining); the first SIGINT or SIGTERM starts the drain; a second
// one during the drain (or the first, if ctx ended) makes Serve return
// ErrAborted at once, leaving the drain unfinished. Serve returns Run's
// result otherwise, after a reload in progress has finished.
func (s *Service) Serve(ctx context.Context, nc *nats.Conn, sigs <-chan os.Signal) error {
	runCtx, drain := context.WithCancel(ctx)
	defer drain()
	abort := make(chan os.Signal, 1)
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		s.watchSignals(runCtx, stop, drain, sigs, abort)
	}()
	// A reload in progress finishes before Serve returns, so that the
	// caller's Close never races with it.
	defer func() {
		close(stop)
		<-watched
	}()
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, nc) }()
	select {
	case err := <-done:
		return err
	case sig := <-abort:
		s.log.Error().Str("signal", sig.String()).Msg("second signal while draining: exiting without finishing the drain")
		return fmt.Errorf("%w (%s)", ErrAborted, sig)
	}
}

// watchSignals handles the signals on sigs until stop is closed: SIGHUP
// reloads the checkpoint while serving; the first SIGINT/SIGTERM starts the
// drain (drain); one during the drain (the first, if ctx ended otherwise)
// goes to abort.
func (s *Service) watchSignals(ctx context.Context, stop <-chan struct{}, drain context.CancelFunc, sigs <-chan os.Signal, abort chan<- os.Signal) {
	for {
		var sig os.Signal
		select {
		case <-stop:
			return
		case v, ok := <-sigs:
			if !ok {
				return
			}
			sig = v
		}
		switch {
		case sig == syscall.SIGHUP && ctx.Err() == nil:
			s.log.Info().Msg("SIGHUP: reloading the checkpoint")
			_ = s.Reload() // logs and counts its own failure
		case sig == syscall.SIGHUP:
			s.log.Info().Msg("SIGHUP while draining: ignored")
		case ctx.Err() == nil:
			s.log.Info().Str("signal", sig.String()).Msg("draining (a second signal exits at once)")
			drain()
		default:
			select {
			case abort <- sig:
			default:
			}
			return
		}
	}
}
