package proxy

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// TestLoadConcurrentStreams sends two waves of concurrent streams through
// tandem. In each wave production is held until every stream has reached it,
// so they are truly concurrent; every client must get the exact stream, and
// every request must be mirrored to both arms and paired once. The first wave
// grows what the runtime keeps for reuse (goroutine descriptors, pools); the
// second must leave the live heap where the first left it. HeapAlloc, not
// HeapInuse: after a 2,000-connection spike, span fragmentation moves
// HeapInuse by more than a leak of several KiB per request would. Afterwards
// no goroutine is left behind.
func TestLoadConcurrentStreams(t *testing.T) {
	const streams = 2000
	// Goroutines of earlier tests in this package (idle keep-alive
	// connections of http.DefaultClient) are not this test's.
	leaks := goleak.IgnoreCurrent()
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{Release: release, Tokens: loadTokens},
		testupstream.Script{Tokens: loadTokens}, testupstream.Script{Tokens: loadTokens},
		map[string]string{"TANDEM_SHADOW_MAX_IN_FLIGHT": fmt.Sprint(streams)})
	transport := &http.Transport{MaxIdleConnsPerHost: streams}
	client := &http.Client{Transport: transport}
	idle := runtime.NumGoroutine()

	loadWave(t, r, client, release, streams, 0)
	heapAfterFirst := settledHeap(t, r, transport, idle)
	release = make(chan struct{})
	r.prod.SetScript(testupstream.Script{Release: release, Tokens: loadTokens})
	loadWave(t, r, client, release, streams/4, streams)
	if grown := int64(settledHeap(t, r, transport, idle)) - int64(heapAfterFirst); grown > 4<<20 {
		t.Errorf("live heap grew by %d bytes over the second wave", grown)
	}

	r.front.Close()
	r.server.Shutdown()
	r.prod.Close()
	r.a.Close()
	r.b.Close()
	goleak.VerifyNone(t, leaks)
}

// loadTokens is the length of every stream of the load test.
const loadTokens = 5

// settledHeap is the live heap once idle keep-alive connections (kept for
// reuse, up to the transports' limits) and the fakes' records are dropped,
// and the goroutines serving those connections have exited: no more than
// goroutines are left.
func settledHeap(t *testing.T, r *rig, client *http.Transport, goroutines int) uint64 {
	t.Helper()
	client.CloseIdleConnections()
	for _, up := range append([]*upstream{r.server.primary}, r.server.arms...) {
		up.transport.(*http.Transport).CloseIdleConnections()
	}
	for _, fake := range []*testupstream.Server{r.prod, r.a, r.b} {
		fake.Forget()
	}
	for deadline := time.Now().Add(20 * time.Second); runtime.NumGoroutine() > goroutines; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after closing idle connections, want at most %d", runtime.NumGoroutine(), goroutines)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return memStats().HeapAlloc
}

// loadWave sends streams concurrent requests, holding production until all
// have reached it, and checks the responses and the counters, which held
// measured requests before.
func loadWave(t *testing.T, r *rig, client *http.Client, release chan struct{}, streams, measured int) {
	t.Helper()
	want := testupstream.StreamBody(loadTokens)
	failures := make(chan string, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"request %d"}]}`, measured+i)
			resp, err := client.Post(r.front.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				failures <- err.Error()
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK || string(got) != want {
				failures <- fmt.Sprintf("request %d: status %d, %d bytes, %v", i, resp.StatusCode, len(got), err)
			}
		})
	}
	// Wait while streams keep arriving; a machine shared with other builds
	// may be slow, but not stuck for 20 seconds.
	arrived, progress := 0, time.Now()
	for arrived+len(failures) < streams {
		time.Sleep(20 * time.Millisecond)
		if now := len(r.prod.Received()); now > arrived {
			arrived, progress = now, time.Now()
		} else if time.Since(progress) > 20*time.Second {
			t.Errorf("only %d of %d streams reached production", arrived, streams)
			break
		}
	}
	close(release)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	r.idle()

	total := float64(measured + streams)
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "completed"}); n != total {
		t.Errorf("production completed = %v, want %v", n, total)
	}
	if n := r.total(t, exporter.MetricMirrorSkipped, nil); n != 0 {
		t.Errorf("%v requests skipped, want none", n)
	}
	for _, arm := range exporter.Arms {
		if n := r.total(t, exporter.MetricRequests, map[string]string{"config": arm}); n != total {
			t.Errorf("%s measured %v requests, want %v", arm, n, total)
		}
	}
	if n, nb := len(r.a.Received()), len(r.b.Received()); n != streams || nb != streams {
		t.Errorf("A received %d, B %d requests, want %d each", n, nb, streams)
	}
	if n := r.value(t, exporter.MetricPairs, map[string]string{"class": "fresh", "result": exporter.PairBothCompleted}); n != total {
		t.Errorf("both_completed pairs = %v, want %v", n, total)
	}
	if n := r.total(t, exporter.MetricPairs, nil); n != total {
		t.Errorf("pairs = %v, want %v", n, total)
	}
}
