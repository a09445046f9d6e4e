package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// deploymentMemoryLimit is the memory limit of deploy/kubernetes's
// Deployment; every load below must stay under half of it.
const deploymentMemoryLimit = 512 << 20

// peakRSS is the high-water mark of a process's resident set, from /proc.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// heldUpstream answers every request with body (as content type ct) once
// all n requests have arrived, so the n are in flight together. It records
// the bodies it received by their length.
type heldUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	received [][]byte
	all      chan struct{}
}

func newHeldUpstream(n int, ct string, body []byte) *heldUpstream {
	u := &heldUpstream{all: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.NotFound(w, r) // tandem's start-up check of the arms
			return
		}
		got, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.received = append(u.received, got)
		if len(u.received) == n {
			close(u.all)
		}
		u.mu.Unlock()
		select {
		case <-u.all:
		case <-time.After(20 * time.Second):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", ct)
		w.Write(body)
	}))
	return u
}

// jsonDocument is a chat completion document of about size bytes.
func jsonDocument(size int) []byte {
	return fmt.Appendf(nil, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`,
		strings.Repeat("w", size))
}

// numbersBody is a chat request of about size bytes whose bulk is an
// array of numbers in a field tandem ignores.
func numbersBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":"hi"}],"logit_bias_list":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i % 10))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// tokenBatchBody is a completions request of about size bytes: a batch of
// token-ID prompts.
func tokenBatchBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","prompt":[`)
	for p := 0; b.Len() < size; p++ {
		if p > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for i := range 1000 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa((p*1000 + i) % 50000))
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestMemoryStaysBoundedUnderHostileLoads runs the real binary with the
// default settings against loads that once took it past the Deployment's
// limit, one process per load, and reads its peak RSS from /proc. Production
// must answer every request byte-identical.
func TestMemoryStaysBoundedUnderHostileLoads(t *testing.T) {
	for _, tc := range []struct {
		name         string
		n            int
		path         string
		request      []byte
		prod, arm    []byte // answers
		prodCT, armT string
	}{
		{"4 MB bodies of numbers", 48, "/v1/chat/completions", numbersBody(4<<20 - 100), jsonDocument(100), jsonDocument(100), "application/json", "application/json"},
		{"4 MB batches of token-ID prompts", 48, "/v1/completions", tokenBatchBody(4<<20 - 10000), jsonDocument(100), jsonDocument(100), "application/json", "application/json"},
		{"8 MB production documents", 50, "/v1/chat/completions", []byte(streamingChat), jsonDocument(8 << 20), jsonDocument(100), "application/json", "application/json"},
		{"8 MB arm documents", 64, "/v1/chat/completions", []byte(streamingChat), jsonDocument(100), jsonDocument(8 << 20), "application/json", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prod := newHeldUpstream(tc.n, tc.prodCT, tc.prod)
			defer prod.Close()
			a := newHeldUpstream(tc.n, tc.armT, tc.arm)
			defer a.Close()
			b := newHeldUpstream(tc.n, tc.armT, tc.arm)
			defer b.Close()
			p := startServe(t, map[string]string{
				"TANDEM_PRIMARY_URL": prod.URL, "TANDEM_A_URL": a.URL, "TANDEM_B_URL": b.URL,
				"TANDEM_SAMPLE_RATE": "1", "TANDEM_SAMPLE_BY": "request",
			})
			var wg sync.WaitGroup
			for i := range tc.n {
				wg.Go(func() {
					resp, err := http.Post("http://"+p.proxyAddr+tc.path, "application/json", bytes.NewReader(tc.request))
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, tc.prod) {
						t.Errorf("request %d: status %d, %d bytes, %v: not production's answer", i, resp.StatusCode, len(got), err)
					}
				})
			}
			wg.Wait()
			prod.mu.Lock()
			for i, got := range prod.received {
				if !bytes.Equal(got, tc.request) {
					t.Errorf("production request %d: %d bytes, want the client's %d", i, len(got), len(tc.request))
				}
			}
			prod.mu.Unlock()
			peak := peakRSS(t, p.cmd.Process.Pid)
			t.Logf("peak RSS %d MiB (limit for this test %d MiB)", peak>>20, deploymentMemoryLimit>>21)
			if peak > deploymentMemoryLimit/2 {
				t.Errorf("peak RSS %d MiB, over half the Deployment's %d MiB limit", peak>>20, deploymentMemoryLimit>>20)
			}
		})
	}
}
