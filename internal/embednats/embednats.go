// Package embednats starts an in-process NATS server: predictord's default
// when no --nats-url is given, and the server of every NATS test.
package embednats

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start starts a NATS server listening on host:port (port -1 picks a free
// port) and waits until it accepts connections. Stop it with Shutdown.
func Start(host string, port int) (*server.Server, error) {
	opts := &server.Options{
		Host:           host,
		Port:           port,
		NoLog:          true,
		NoSigs:         true,
		MaxPayload:     4 << 20,
		MaxControlLine: 4096,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats on %s:%d: %w", host, port, err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats on %s:%d: not ready after 10 s", host, port)
	}
	return s, nil
}
