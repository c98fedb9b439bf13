package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"rgcpred/stream"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// writeCerts makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, and writes them as PEM files to dir.
func writeCerts(t *testing.T, dir string) (ca *x509.CertPool, serverCert tls.Certificate) {
	t.Helper()
	now := time.Now()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(crand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, NotBefore: now.Add(-time.Hour),
			NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(crand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
		_ = os.WriteFile(filepath.Join(dir, name+".pem"), certPEM, 0o600)
		_ = os.WriteFile(filepath.Join(dir, name+"-key.pem"), keyPEM, 0o600)
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	serverCert = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	leaf("client", 3, x509.ExtKeyUsageClientAuth)
	_ = os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	ca = x509.NewCertPool()
	ca.AddCert(caCert)
	return ca, serverCert
}

// startServer starts a NATS server with opts, ready for connections; it
// shuts down when the test ends.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("server not ready")
	}
	return srv
}

// TestNATSMutualTLS: the daemon verifies the server with --nats-tls-ca and
// presents --nats-tls-cert/--nats-tls-key to a server that requires client
// certificates.
func TestNATSMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, sc := writeCerts(t, dir)
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, TLS: true, TLSVerify: true,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{sc}, ClientCAs: ca, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
	srv := startServer(t, opts)
	if _, err := nats.Connect(srv.ClientURL(), nats.RootCAs(filepath.Join(dir, "ca.pem"))); err == nil {
		t.Fatal("server accepts clients without a certificate: test is void")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuf{}
	args := []string{"--nats-url", srv.ClientURL(), "--metrics-addr", "", "--model", "fake",
		"--nats-tls-ca", filepath.Join(dir, "ca.pem"), "--nats-tls-cert", filepath.Join(dir, "client.pem"), "--nats-tls-key", filepath.Join(dir, "client-key.pem")}
	go func() { done <- run(ctx, args, logs, nil, fakeLoader([]int{1, 2})) }()
	nc, err := nats.Connect(srv.ClientURL(), nats.RootCAs(filepath.Join(dir, "ca.pem")),
		nats.ClientCert(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, _ := stream.NewPublisher(nc, "dev0")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := p.Status(context.Background()); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("daemon not serving over TLS: %v\n%s", err, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
