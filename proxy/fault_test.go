package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// total sums every series of name whose labels include match.
func (r *rig) total(t *testing.T, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := match[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// receive waits for one value from c, failing the test if none comes.
func receive(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// send gives c one value, failing the test if nobody takes it.
func send(t *testing.T, c chan<- struct{}) {
	t.Helper()
	select {
	case c <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took the value")
	}
}

func malformedFrames(end bool) []string {
	frames := []string{
		": keep-alive comment\n\n",
		"data: {not json\n\n",
		"event: mystery\nid: 7\nretry: x\n\n",
		"data: \x00\xff\xfe binary\n\n",
		"no field separator at all\n\n",
		`data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}` + "\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\n\n",
	}
	if end {
		frames = append(frames, "data: [DONE]\n\n")
	}
	return frames
}

// largeFrames is a stream whose one content frame is 1 MiB long.
func largeFrames() []string {
	return []string{
		`data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n",
		`data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 1<<20) + `"}}]}` + "\n\n",
		`data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}` + "\n\n",
		"data: [DONE]\n\n",
	}
}

// pieces splits s into chunks of n bytes, cutting frames and JSON anywhere.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// TestArmFaultsNeverReachProduction holds the arms (a hanging B holds itself)
// until production's response has been fully received, then lets each fault
// happen: production is byte-identical and done while the pair is still in
// flight, each fault is counted under its outcome, and the request yields
// exactly one pair result.
func TestArmFaultsNeverReachProduction(t *testing.T) {
	drip := pieces(testupstream.StreamBody(3), 7)
	for _, tc := range []struct {
		name       string
		a, b       testupstream.Script
		aDown      bool
		pace       int // values the test feeds B's Pace after production is done
		timeout    string
		aOut, bOut string
		pair       string
		bTokens    float64
	}{
		{name: "A refuses connections", aDown: true,
			aOut: exporter.OutcomeError, bOut: exporter.OutcomeCompleted, pair: exporter.PairAFailed, bTokens: 3},
		{name: "B answers 500", b: testupstream.Script{Status: 500},
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeError, pair: exporter.PairBFailed},
		{name: "B answers 429", b: testupstream.Script{Status: 429},
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeError, pair: exporter.PairBFailed},
		{name: "B hangs past the shadow timeout", b: testupstream.Script{Hang: true}, timeout: "5s",
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeTimeout, pair: exporter.PairBFailed},
		{name: "B reset mid-stream", b: testupstream.Script{Tokens: 5, CutAfter: 2},
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeIncomplete, pair: exporter.PairBFailed},
		{name: "B malformed SSE with its end", b: testupstream.Script{Frames: malformedFrames(true)},
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeCompleted, pair: exporter.PairBothCompleted, bTokens: 1},
		{name: "B malformed SSE without its end", b: testupstream.Script{Frames: malformedFrames(false)},
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeIncomplete, pair: exporter.PairBFailed},
		{name: "B slow drip", b: testupstream.Script{Frames: drip}, pace: len(drip) - 1,
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeCompleted, pair: exporter.PairBothCompleted, bTokens: 3},
		{name: "B 1 MiB frame", b: testupstream.Script{Frames: largeFrames()},
			aOut: exporter.OutcomeCompleted, bOut: exporter.OutcomeCompleted, pair: exporter.PairBothCompleted, bTokens: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A hanging B holds the pair itself; A must then answer before
			// the shared shadow deadline, so it is not held.
			release := make(chan struct{})
			if !tc.b.Hang {
				tc.a.Release, tc.b.Release = release, release
			}
			pace := make(chan struct{}, tc.pace)
			if tc.pace > 0 {
				tc.b.Pace = pace
			}
			env := map[string]string{}
			if tc.timeout != "" {
				env["TANDEM_SHADOW_TIMEOUT"] = tc.timeout
			}
			r := newRig(t, testupstream.Script{}, tc.a, tc.b, env)
			if tc.aDown {
				r.a.Close()
			}

			_, body := post(t, r.front.URL, chatBody, nil)
			if string(body) != testupstream.StreamBody(3) {
				t.Fatalf("production body altered: %q", body)
			}
			receive(t, r.b.Arrived(), "B receiving the mirrored request")
			// Each arm holds its slot until it finishes: B is held here, and
			// A too unless it failed at once or was never held.
			held := []string{exporter.ConfigB}
			if !tc.aDown && !tc.b.Hang {
				held = append(held, exporter.ConfigA)
			}
			for _, arm := range held {
				if n := r.value(t, exporter.MetricShadowInFlight, map[string]string{"config": arm}); n != 1 {
					t.Fatalf("%s in flight = %v once production was answered, want 1", arm, n)
				}
			}
			close(release)
			for range tc.pace {
				pace <- struct{}{}
			}
			r.idle()

			for config, outcome := range map[string]string{"A": tc.aOut, "B": tc.bOut} {
				if n := r.value(t, exporter.MetricRequests, map[string]string{"config": config, "class": "fresh", "outcome": outcome}); n != 1 {
					t.Errorf("%s %s = %v, want 1", config, outcome, n)
				}
				if n := r.total(t, exporter.MetricRequests, map[string]string{"config": config}); n != 1 {
					t.Errorf("%s measured %v requests, want 1", config, n)
				}
			}
			if n := r.value(t, exporter.MetricPairs, map[string]string{"class": "fresh", "result": tc.pair}); n != 1 {
				t.Errorf("pairs %s = %v, want 1", tc.pair, n)
			}
			if n := r.total(t, exporter.MetricPairs, nil); n != 1 {
				t.Errorf("pairs = %v, want exactly 1", n)
			}
			if n := r.total(t, exporter.MetricOutputTokens, map[string]string{"config": "B"}); n != tc.bTokens {
				t.Errorf("B output tokens = %v, want %v", n, tc.bTokens)
			}
			if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "completed"}); n != 1 {
				t.Errorf("production completed = %v, want 1", n)
			}
		})
	}
}

// TestEverySampledRequestYieldsOnePair checks the accounting identity with
// skips: pairs = sampled requests - overloaded skips.
func TestEverySampledRequestYieldsOnePair(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{}, testupstream.Script{Release: release}, testupstream.Script{Status: 500},
		map[string]string{"TANDEM_SHADOW_MAX_IN_FLIGHT": "2"})
	const sent = 10
	for range sent {
		_, body := post(t, r.front.URL, chatBody, nil)
		if string(body) != testupstream.StreamBody(3) {
			t.Fatalf("production body altered: %q", body)
		}
	}
	r.waitValue(t, exporter.MetricMirrorSkipped, map[string]string{"reason": exporter.SkipOverloaded}, sent-2)
	close(release)
	r.idle()
	skipped := r.value(t, exporter.MetricMirrorSkipped, map[string]string{"reason": exporter.SkipOverloaded})
	if skipped != sent-2 {
		t.Errorf("overloaded skips = %v, want %d (two slots held by A)", skipped, sent-2)
	}
	if pairs := r.total(t, exporter.MetricPairs, nil); pairs != sent-skipped {
		t.Errorf("pairs = %v, want sampled - skipped = %v", pairs, sent-skipped)
	}
	for _, arm := range exporter.Arms {
		if n := r.total(t, exporter.MetricRequests, map[string]string{"config": arm}); n != sent-skipped {
			t.Errorf("%s measured %v requests, want %v", arm, n, sent-skipped)
		}
	}
}

func TestProductionLargeFrameIsByteIdentical(t *testing.T) {
	frames := largeFrames()
	r := newRig(t, testupstream.Script{Frames: frames}, testupstream.Script{}, testupstream.Script{}, nil)
	_, body := post(t, r.front.URL, chatBody, nil)
	if want := strings.Join(frames, ""); string(body) != want {
		t.Fatalf("production body: %d bytes, want the %d sent", len(body), len(want))
	}
	r.idle()
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "completed"}); n != 1 {
		t.Errorf("production completed = %v, want 1", n)
	}
}

// TestProductionDripIsForwardedAsItArrives steps production one 5-byte piece
// at a time: the upstream writes piece i+1 only after the client has read
// piece i through tandem, so nothing can be held back for a whole frame.
func TestProductionDripIsForwardedAsItArrives(t *testing.T) {
	stream := testupstream.StreamBody(3)
	drip := pieces(stream, 5)
	pace := make(chan struct{})
	r := newRig(t, testupstream.Script{Frames: drip, Pace: pace}, testupstream.Script{}, testupstream.Script{}, nil)
	req, _ := http.NewRequest(http.MethodPost, r.front.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []byte
	buf := make([]byte, 64)
	for i, piece := range drip {
		want := len(got) + len(piece)
		for len(got) < want {
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil && len(got) < want {
				t.Fatalf("read after %d bytes: %v", len(got), err)
			}
		}
		if string(got) != stream[:want] {
			t.Fatalf("after piece %d the client has %q, want %q", i, got, stream[:want])
		}
		if i < len(drip)-1 {
			send(t, pace)
		}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
		t.Fatalf("after the stream: %q, %v", rest, err)
	}
	r.front.Close()
	r.idle() // the measurement is recorded beside the handler
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "completed"}); n != 1 {
		t.Errorf("production completed = %v, want 1", n)
	}
}

// TestPrimaryCutReachesClientAsCut: a production stream reset mid-way must
// reach the client as a failed read, never as a clean end.
func TestPrimaryCutReachesClientAsCut(t *testing.T) {
	r := newRig(t, testupstream.Script{Tokens: 5, CutAfter: 2}, testupstream.Script{}, testupstream.Script{}, nil)
	req, _ := http.NewRequest(http.MethodPost, r.front.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("client read a clean end after a cut upstream: %q", got)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("client read error %v, want unexpected EOF", err)
	}
	if full := testupstream.StreamBody(5); !strings.HasPrefix(full, string(got)) || len(got) >= len(full) {
		t.Errorf("client got %q, want a strict prefix of the stream", got)
	}
	if bytes.Contains(got, []byte("[DONE]")) {
		t.Errorf("client got a fake end: %q", got)
	}
	r.front.Close()
	r.idle() // the measurement is recorded beside the handler
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "incomplete"}); n != 1 {
		t.Errorf("production incomplete = %v, want 1", n)
	}
}

// TestClientGoneMidStream: the client reads the first frame and leaves; the
// upstream request is canceled and production is counted canceled.
func TestClientGoneMidStream(t *testing.T) {
	pace := make(chan struct{})
	r := newRig(t, testupstream.Script{Pace: pace}, testupstream.Script{}, testupstream.Script{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.front.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitAfter(testupstream.StreamBody(3), "\n\n")[0]
	got := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
		t.Fatalf("first frame %q, %v", got, err)
	}
	cancel()
	resp.Body.Close()
	receive(t, r.prod.Canceled(), "production upstream seeing the cancellation")
	r.front.Close()
	r.idle() // the measurement is recorded beside the handler
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "canceled"}); n != 1 {
		t.Errorf("production canceled = %v, want 1", n)
	}
}

// TestSlowReaderBackPressure: a client that reads nothing while production
// streams 50 MiB. tandem must not buffer the stream: its heap stays bounded
// and the upstream is held back by the sockets; the client then gets every
// byte.
func TestSlowReaderBackPressure(t *testing.T) {
	const frameBytes, frameCount = 1 << 10, 50 << 10
	frame := `data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("z", frameBytes-len(`data: {"choices":[{"index":0,"delta":{"content":""}}]}`)-2) + `"}}]}` + "\n\n"
	frames := make([]string, frameCount)
	for i := range frames {
		frames[i] = frame
	}
	frames = append(frames, "data: [DONE]\n\n")
	total := int64(frameBytes*frameCount + len("data: [DONE]\n\n"))

	r := newRig(t, testupstream.Script{Frames: frames}, testupstream.Script{}, testupstream.Script{}, nil)
	before := memStats().HeapInuse
	req, _ := http.NewRequest(http.MethodPost, r.front.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	written := waitUntilStalled(r.prod)
	grown := int64(memStats().HeapInuse) - int64(before)
	t.Logf("upstream wrote %d of %d bytes before stalling; heap grew %d bytes", written, total, grown)
	if written >= total {
		t.Fatalf("upstream wrote the whole %d bytes to a client that read nothing", total)
	}
	if written > 32<<20 {
		t.Errorf("upstream wrote %d bytes before being held back, more than socket buffers hold", written)
	}
	if grown > 16<<20 {
		t.Errorf("heap grew by %d bytes while the client read nothing", grown)
	}

	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != total {
		t.Fatalf("client read %d bytes (%v), want %d", n, err, total)
	}
	r.front.Close()
	r.idle() // the measurement is recorded beside the handler
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "completed"}); n != 1 {
		t.Errorf("production completed = %v, want 1", n)
	}
}

// waitUntilStalled waits until the upstream has written nothing new for a
// while and returns what it wrote.
func waitUntilStalled(u *testupstream.Server) int64 {
	last, still := u.Written(), 0
	for deadline := time.Now().Add(20 * time.Second); still < 10 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if now := u.Written(); now != last {
			last, still = now, 0
			continue
		}
		still++
	}
	return last
}

// memStats reads the memory statistics after enough collections for sync
// pools and finalized objects to be freed.
func memStats() runtime.MemStats {
	for range 4 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
