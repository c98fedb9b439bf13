package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// Ready reports whether the service is ready (Readiness is nil).
func (s *Service) Ready() bool { return s.Readiness() == nil }

// Readiness returns nil while the service is subscribed, connected to NATS
// and, with Config.StaleAfter, no device that has sent frames has gone
// silent for longer than StaleAfter; otherwise the reason it is not ready.
func (s *Service) Readiness() error {
	nc := s.nc.Load()
	if !s.running.Load() || nc == nil || !nc.IsConnected() {
		return errors.New("not subscribed or NATS disconnected")
	}
	if s.cfg.StaleAfter > 0 {
		for _, d := range s.devices {
			if age, ok := d.frameAge(); ok && age > s.cfg.StaleAfter {
				return fmt.Errorf("no frames from device %s for %.1f s", d.name, age.Seconds())
			}
		}
	}
	return nil
}

// FrameAge returns the time since the last valid frames message of device
// arrived, and false if it has sent none yet or is not served.
func (s *Service) FrameAge(device string) (time.Duration, bool) {
	for _, d := range s.devices {
		if d.name == device {
			return d.frameAge()
		}
	}
	return 0, false
}

// frameAge returns the time since the device's last valid frames message
// arrived, false before the first.
func (d *device) frameAge() (time.Duration, bool) {
	at := d.lastFrame.Load()
	if at == 0 {
		return 0, false
	}
	return max(time.Since(time.Unix(0, at)), 0), true
}

// frameAges reports each device's frame age in seconds to the frame-age
// gauge; devices that have sent no frames yet are left out.
func (s *Service) frameAges(report func(device string, seconds float64)) {
	for _, d := range s.devices {
		if age, ok := d.frameAge(); ok {
			report(d.name, age.Seconds())
		}
	}
}

// Handler serves /metrics (Prometheus exposition), /healthz (the process
// is alive) and /readyz (200 when Readiness is nil, else 503 and the
// reason).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Readiness(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

// ServingHTTPMsg is the message ListenHTTP logs once it listens; its
// field addr is the address bound, a port 0 resolved to the one the
// kernel picked (the nemesis finds an instance's /metrics with it).
const ServingHTTPMsg = "serving /metrics, /healthz, /readyz"

// ServingAddr returns the address a JSON log line of ListenHTTP names
// (ok false for any other line).
func ServingAddr(line []byte) (addr string, ok bool) {
	if !bytes.Contains(line, []byte(ServingHTTPMsg)) {
		return "", false
	}
	var e map[string]any
	if json.Unmarshal(line, &e) != nil || e[zerolog.MessageFieldName] != ServingHTTPMsg {
		return "", false
	}
	addr, ok = e["addr"].(string)
	return addr, ok && addr != ""
}

// ListenHTTP serves Handler on addr (see Handler) in the background and
// logs the address bound (ServingHTTPMsg); stop shuts the server down, waiting at most 2 s
// for requests in flight.
func (s *Service) ListenHTTP(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("metrics server")
		}
	}()
	s.log.Info().Str("addr", ln.Addr().String()).Msg(ServingHTTPMsg)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}
