package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// TestDefaultInFlightHoldsLLMStreams fills both arms to the default
// TANDEM_SHADOW_MAX_IN_FLIGHT with held streams: all are mirrored, the next
// is skipped as overloaded, and what tandem holds per mirrored request
// (goroutines, connections and buffers on both arms, and the fake
// upstreams' side of the connections besides) stays under 128 KiB: 128 MiB
// at the default, a quarter of the Deployment's memory limit.
func TestDefaultInFlightHoldsLLMStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 1024 mirrored requests")
	}
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{}, testupstream.Script{Release: release}, testupstream.Script{Release: release}, nil)
	defer close(release)
	n := r.server.cfg.ShadowMaxInFlight
	if n < 1024 {
		t.Fatalf("default in-flight limit %d, want at least 1024: 8 sampled requests/s of 2-minute streams", n)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	send := func() {
		resp, err := client.Post(r.front.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send() // the first request grows the pools and transports every later one reuses
	r.waitValue(t, exporter.MetricShadowInFlight, map[string]string{"config": "B"}, 1)
	before := memStats()
	for range n - 1 {
		send()
	}
	r.waitValue(t, exporter.MetricShadowInFlight, map[string]string{"config": "A"}, float64(n))
	r.waitValue(t, exporter.MetricShadowInFlight, map[string]string{"config": "B"}, float64(n))
	after := memStats()
	send()
	r.waitValue(t, exporter.MetricMirrorSkipped, map[string]string{"reason": "overloaded"}, 1)

	perRequest := (int64(after.HeapAlloc+after.StackInuse) - int64(before.HeapAlloc+before.StackInuse)) / int64(n-1)
	t.Logf("%d bytes per mirrored request in flight (both arms, both ends of their connections; heap %d, stacks %d); %d MiB at the default", perRequest, int64(after.HeapAlloc-before.HeapAlloc)/int64(n-1), int64(after.StackInuse-before.StackInuse)/int64(n-1), perRequest*int64(n)>>20)
	if limit := int64(128 << 10); !raceEnabled && perRequest > limit {
		t.Errorf("%d bytes per mirrored request in flight, want at most %d", perRequest, limit)
	}
}
