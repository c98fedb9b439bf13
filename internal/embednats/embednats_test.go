package embednats

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestStartServesPubSub(t *testing.T) {
	s, err := Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(m.Data) != "hi" {
		t.Fatalf("got %v, %v", m, err)
	}
}
