// Package embednats starts an in-process NATS server: predictord's default
// when no --nats-url is given, and the server of every NATS test.
package embednats

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configure an embedded server.
type Options struct {
	// Host is the listen host (e.g. 127.0.0.1).
	Host string
	// Port is the listen port; -1 picks a free port. 0 is refused: the
	// NATS server reads it as its default port 4222, which is easy to
	// confuse with "any free port".
	Port int
	// Username and Password, when set, are required of every client.
	Username, Password string
	// Token, when set, is required of every client (not with Username).
	Token string
	// JetStream enables JetStream (streams, key-value buckets), storing in
	// StoreDir, which must then be set: the server's default directory is
	// shared by every server of the machine. Off by default: predictord's
	// single-instance default needs no JetStream.
	JetStream bool
	// StoreDir is JetStream's storage directory (with JetStream only). A
	// server restarted with the same StoreDir finds its streams again.
	StoreDir string
	// ConfigFile, when set, is a nats-server configuration file (its
	// users, permissions and limits: deploy/nats/predictord.conf) read
	// with the server's own parser; Host, Port and JetStream above still
	// apply, and Username, Password and Token must be empty (the file
	// names the users).
	ConfigFile string
}

// Start starts a NATS server without authentication listening on
// host:port (port -1 picks a free port) and waits until it accepts
// connections. Stop it with Shutdown.
func Start(host string, port int) (*server.Server, error) {
	return StartOptions(Options{Host: host, Port: port})
}

// StartOptions starts a NATS server configured by o and waits until it
// accepts connections. An explicit port that is already taken is an error
// (the server does not move to another port), and so is a host other than
// loopback without authentication: anyone on the network could then send
// frames and forge decisions. Stop it with Shutdown.
func StartOptions(o Options) (*server.Server, error) {
	addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	switch {
	case o.Port == 0 || o.Port < -1 || o.Port > 65535:
		return nil, fmt.Errorf("embedded nats on %s: port %d out of range (-1 picks a free port)", addr, o.Port)
	case (o.Username == "") != (o.Password == ""):
		return nil, fmt.Errorf("embedded nats on %s: username and password go together", addr)
	case o.Username != "" && o.Token != "":
		return nil, fmt.Errorf("embedded nats on %s: username/password and token exclude each other", addr)
	case o.JetStream != (o.StoreDir != ""):
		return nil, fmt.Errorf("embedded nats on %s: JetStream and a store directory go together", addr)
	case o.ConfigFile != "" && (o.Username != "" || o.Token != ""):
		return nil, fmt.Errorf("embedded nats on %s: the configuration file %s names the users: no username or token besides", addr, o.ConfigFile)
	case !Loopback(o.Host) && o.Username == "" && o.Token == "" && o.ConfigFile == "":
		return nil, fmt.Errorf("embedded nats on %s: a non-loopback address without authentication refused (set a user and password or a token, or listen on 127.0.0.1)", addr)
	}
	if o.Port > 0 {
		// The server itself reports a taken port only by never becoming
		// ready; binding first gives the reason at once.
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("embedded nats on %s: %w", addr, err)
		}
		if err := ln.Close(); err != nil {
			return nil, fmt.Errorf("embedded nats on %s: %w", addr, err)
		}
	}
	opts := &server.Options{MaxPayload: 4 << 20, MaxControlLine: 4096}
	if o.ConfigFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(o.ConfigFile); err != nil {
			return nil, fmt.Errorf("embedded nats on %s: %w", addr, err)
		}
		if len(opts.Users) == 0 && len(opts.Nkeys) == 0 && !Loopback(o.Host) {
			return nil, fmt.Errorf("embedded nats on %s: %s names no users: a non-loopback address without authentication refused", addr, o.ConfigFile)
		}
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = o.Host, o.Port, true, true
	opts.Username, opts.Password, opts.Authorization = o.Username, o.Password, o.Token
	opts.JetStream, opts.StoreDir = o.JetStream, o.StoreDir
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats on %s: %w", addr, err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats on %s: not ready after 10 s", addr)
	}
	return s, nil
}

// ParseAddr parses a listen address host:port for Options: port 0 means
// any free port and becomes -1 (the NATS server reads 0 as 4222).
func ParseAddr(addr string) (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("listen address %q: %w", addr, err)
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("listen address %q: bad port", addr)
	}
	if port == 0 {
		port = -1
	}
	return host, port, nil
}

// Loopback reports whether host (a listen host: an IP address or
// "localhost") is reachable only from this machine. The empty host listens
// on every interface.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
