package proxy

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/kestrelops/tandem/proxy/testupstream"
)

// writeCounter counts the writes on the connections it dials and keeps
// what they carried.
type writeCounter struct {
	mu      sync.Mutex
	writes  int
	written bytes.Buffer
}

type countedConn struct {
	net.Conn
	c *writeCounter
}

func (c countedConn) Write(p []byte) (int, error) {
	c.c.mu.Lock()
	c.c.writes++
	c.c.written.Write(p)
	c.c.mu.Unlock()
	return c.Conn.Write(p)
}

func (w *writeCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return countedConn{conn, w}, nil
}

func TestProductionRequestLeavesInOneWrite(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, map[string]string{"TANDEM_SAMPLE_RATE": "0"})
	var w writeCounter
	r.server.primary.transport.(*http.Transport).DialContext = w.dial
	post(t, r.front.URL, chatBody, nil)

	w.mu.Lock()
	defer w.mu.Unlock()
	if !bytes.HasSuffix(w.written.Bytes(), []byte(chatBody)) {
		t.Fatalf("production connection carried %q, want the request ending in the client's body", w.written.Bytes())
	}
	if w.writes != 1 {
		t.Errorf("request headers and body left in %d writes, want 1", w.writes)
	}
}
