package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/sse"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// rawExchange writes raw to addr and returns what the server answered until
// it closed the connection or 10 s passed.
func rawExchange(t *testing.T, addr, raw string, halfClose bool) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		conn.(*net.TCPConn).CloseWrite()
	}
	got, _ := io.ReadAll(conn)
	return string(got)
}

func TestProductionGetsTheRawQueryAndEveryEndToEndHeader(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	addr := strings.TrimPrefix(r.front.URL, "http://")
	queries := []string{"a=1;b=2", "a=%zz&b=2", "x=%%", "q=a+b&q=c", "=", "&&", "a=1&a=2&a=", "k=v%00", "%7e=%7E", "a==b"}
	for _, path := range []string{"/v1/chat/completions", "/v1/other"} {
		for _, q := range queries {
			r.prod.Forget()
			raw := "POST " + path + "?" + q + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
				"Forwarded: for=192.0.2.60;proto=http;by=203.0.113.43\r\n" +
				"X-Forwarded-For: 10.0.0.1, 10.0.0.2\r\nX-Forwarded-Host: client.example\r\nX-Forwarded-Proto: https\r\n" +
				"X-Repeat: one\r\nX-Repeat: two\r\nX-Empty:\r\nX-Spaces: a  b\r\n" +
				fmt.Sprintf("Content-Length: %d\r\nConnection: close\r\n\r\n", len(chatBody)) + chatBody
			if got := rawExchange(t, addr, raw, false); !strings.HasPrefix(got, "HTTP/1.1 200") {
				t.Fatalf("%s?%s: answered %.40q", path, q, got)
			}
			rec := r.prod.Received()
			if len(rec) != 1 {
				t.Fatalf("%s?%s: production received %d requests", path, q, len(rec))
			}
			if rec[0].RawQuery != q {
				t.Errorf("%s?%s: production got query %q", path, q, rec[0].RawQuery)
			}
			for name, want := range map[string][]string{
				"Forwarded":         {"for=192.0.2.60;proto=http;by=203.0.113.43"},
				"X-Forwarded-For":   {"10.0.0.1, 10.0.0.2"},
				"X-Forwarded-Host":  {"client.example"},
				"X-Forwarded-Proto": {"https"},
				"X-Repeat":          {"one", "two"},
				"X-Empty":           {""},
				"X-Spaces":          {"a  b"},
			} {
				if got := rec[0].Header.Values(name); !slices.Equal(got, want) {
					t.Errorf("%s?%s: production %s = %q, want %q", path, q, name, got, want)
				}
			}
			if string(rec[0].Body) != chatBody {
				t.Errorf("%s?%s: production body changed", path, q)
			}
		}
	}
	r.idle()
}

func TestHalfClosedClientNeverGetsAnEmptyOK(t *testing.T) {
	r := newRig(t, testupstream.Script{Delay: 200 * time.Millisecond}, testupstream.Script{}, testupstream.Script{}, nil)
	addr := strings.TrimPrefix(r.front.URL, "http://")
	for _, path := range []string{"/v1/chat/completions", "/v1/other"} {
		raw := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(chatBody)) + chatBody
		got := rawExchange(t, addr, raw, true)
		// Either the whole answer or no answer: never a status without it.
		if got != "" && !strings.Contains(got, "data: [DONE]") {
			t.Errorf("%s: half-closed client got %q, want the whole answer or a closed connection", path, got)
		}
	}
	r.idle()
}

func TestClientBodyFaultsAreTheClients(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_BODY_READ_TIMEOUT": "1s", "TANDEM_MIRROR_MAX_BODY_BYTES": "64"})
	addr := strings.TrimPrefix(r.front.URL, "http://")
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 200) + `"}]}`
	for _, tc := range []struct {
		name, raw string
		want      int
	}{
		{"malformed chunk size", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400},
		{"malformed chunk, other path", "POST /v1/other HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcdefgh\r\n0\r\n\r\n", 400},
		{"malformed chunk after the mirror limit", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n", len(big), big) + "zz\r\n", 400},
		{"body stalls (declared length)", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":", 408},
		{"body stalls (chunked)", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{\"model\":\r\n", 408},
		{"body stalls past the mirror limit", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + big, 408},
	} {
		got := rawExchange(t, addr, tc.raw, false)
		want := fmt.Sprintf("HTTP/1.1 %d", tc.want)
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s: answered %.60q, want %s", tc.name, got, want)
		}
	}
	r.idle()
	if strings.Contains(r.logs.String(), "production request failed") {
		t.Errorf("a client's fault was logged as production's:\n%s", r.logs.String())
	}
	for _, class := range []string{exporter.ClassFresh, exporter.ClassRepeatedPrefix} {
		if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": class, "outcome": "error"}); n != 0 {
			t.Errorf("production %s errors = %v, want 0", class, n)
		}
	}
}

func TestBufferBudgetSendsToProductionUnmeasured(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{Release: release}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_MAX_BUFFERED_BYTES": "1048576", "TANDEM_MIRROR_MAX_BODY_BYTES": "250000"})
	// Each body holds about four times its size (the body and room for its
	// prompt): one fits in the budget, the others go to production
	// unmeasured.
	body := func(i int) string {
		return fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"%d %s"}]}`, i, strings.Repeat("y", 200_000))
	}
	const n = 5
	var wg sync.WaitGroup
	answers := make([]string, n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, r.front.URL+"/v1/chat/completions", strings.NewReader(body(i)))
			if i%2 == 1 {
				req.ContentLength = -1 // chunked
				req.Body = io.NopCloser(io.MultiReader(strings.NewReader(body(i))))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers[i] = string(got)
		})
	}
	for range n {
		<-r.prod.Arrived()
	}
	if got := r.value(t, exporter.MetricBufferedBytes, nil); got > 1<<20 {
		t.Errorf("held %v bytes, over the 1 MiB budget", got)
	}
	close(release)
	wg.Wait()
	r.idle()
	_, want := post(t, r.prod.URL, body(0), nil)
	for i, a := range answers {
		if a != string(want) {
			t.Errorf("request %d: production answer changed: %.80q", i, a)
		}
	}
	received := map[string]bool{}
	for _, rec := range r.prod.Received() {
		received[string(rec.Body)] = true
	}
	for i := range n {
		if !received[body(i)] {
			t.Errorf("request %d did not reach production byte-identical", i)
		}
	}
	// Over budget counts requests production got unmeasured and measured
	// requests whose mirrored bodies did not fit.
	skipped := r.value(t, exporter.MetricMirrorSkipped, map[string]string{"reason": exporter.SkipOverBudget})
	measured := r.total(t, exporter.MetricRequests, map[string]string{"config": "production"})
	if measured < 1 || measured > 2 || skipped < n-measured {
		t.Errorf("measured %v (want 1 or 2 of %d), over budget %v", measured, n, skipped)
	}
	// A handler lets go of its bytes after the client has the whole answer.
	r.waitValue(t, exporter.MetricBufferedBytes, nil, 0)
}

func TestShadowReadLimitsCutAndCount(t *testing.T) {
	frames := []string{"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"}
	for range 2000 {
		frames = append(frames, "data: {\"choices\":[{\"delta\":{\"content\":\""+strings.Repeat("z", 1000)+"\"}}]}\n\n")
	}
	frames = append(frames, "data: [DONE]\n\n")
	long := testupstream.Script{Frames: frames}
	r := newRig(t, testupstream.Script{Frames: frames}, long, long,
		map[string]string{"TANDEM_SHADOW_MAX_RESPONSE_BYTES": "100000"})
	resp, got := post(t, r.front.URL, chatBody, nil)
	if resp.StatusCode != http.StatusOK || string(got) != strings.Join(frames, "") {
		t.Fatalf("production answer changed: status %d, %d bytes", resp.StatusCode, len(got))
	}
	r.idle()
	for _, arm := range []string{"A", "B"} {
		if n := r.total(t, exporter.MetricRequests, map[string]string{"config": arm, "outcome": exporter.OutcomeTruncated}); n != 1 {
			t.Errorf("%s truncated = %v, want 1", arm, n)
		}
	}
	if n := r.total(t, exporter.MetricRequests, map[string]string{"config": "production", "outcome": exporter.OutcomeCompleted}); n != 1 {
		t.Errorf("production completed = %v, want 1 (its limits are the client's)", n)
	}
}

func TestRateBudget(t *testing.T) {
	now := time.Unix(0, 0)
	rb := newRateBudget(1000, func() time.Time { return now })
	if !rb.take(1000) {
		t.Fatal("a full bucket refused its size")
	}
	if rb.take(1) {
		t.Fatal("an empty bucket gave a byte")
	}
	now = now.Add(500 * time.Millisecond)
	if !rb.take(500) || rb.take(1) {
		t.Fatal("half a second did not refill exactly half the bucket")
	}
	now = now.Add(time.Hour)
	if !rb.take(1000) || rb.take(1) {
		t.Fatal("the bucket held more than one second of rate")
	}
}

func TestArmFailuresAreLoggedOnceThenSummarised(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{Status: 401}, nil)
	for range 20 {
		post(t, r.front.URL, chatBody, nil)
	}
	r.idle()
	logs := r.logs.String()
	if n := strings.Count(logs, "arm request failed"); n != 1 {
		t.Errorf("logged %d first failures, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, "config=B failure=\"HTTP 401\"") {
		t.Errorf("the log does not say B answered 401:\n%s", logs)
	}
	if strings.Contains(logs, "config=A") {
		t.Errorf("the healthy arm was logged:\n%s", logs)
	}
}

func TestFailureLogSummarisesEachMinute(t *testing.T) {
	var out bytes.Buffer
	f := newFailureLog(slogTo(&out), "A")
	start := time.Unix(0, 0)
	for i := range 100 {
		f.note("dial: connect: connection refused", start.Add(time.Duration(i)*time.Second))
	}
	f.note("HTTP 500", start.Add(100*time.Second))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// The first refusal at once, one summary at 60 s, the first 500 at once.
	if len(lines) != 3 {
		t.Fatalf("logged %d lines, want 3:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[1], "count=60") {
		t.Errorf("summary %q does not count the 60 refusals since the first", lines[1])
	}
	for i := range 1000 {
		f.note(fmt.Sprintf("kind %d", i), start.Add(101*time.Second))
	}
	if len(f.seen) > maxFailureKinds {
		t.Errorf("remembered %d kinds, more than %d", len(f.seen), maxFailureKinds)
	}
}

func TestArmCheckSaysWhatItFound(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	r.server.CheckArms(t.Context())
	logs := r.logs.String()
	// The fake upstream has no /v1/models: both arms are reported.
	for _, arm := range []string{"A", "B"} {
		if !strings.Contains(logs, "arm check failed") || !strings.Contains(logs, "config="+arm) {
			t.Errorf("arm check of %s not logged:\n%s", arm, logs)
		}
	}
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestFramesOverTheBudgetAreNotMeasured(t *testing.T) {
	frames := []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("z", 700<<10) + "\"}}]}\n\n",
		"data: [DONE]\n\n",
	}
	s := testupstream.Script{Frames: frames}
	r := newRig(t, s, s, s, map[string]string{"TANDEM_MAX_BUFFERED_BYTES": "1048576", "TANDEM_MIRROR_MAX_BODY_BYTES": "1024"})
	resp, got := post(t, r.front.URL, chatBody, nil)
	if resp.StatusCode != http.StatusOK || string(got) != strings.Join(frames, "") {
		t.Fatalf("production answer changed: status %d, %d bytes", resp.StatusCode, len(got))
	}
	r.idle()
	for _, config := range exporter.Configs {
		if n := r.total(t, exporter.MetricRequests, map[string]string{"config": config, "outcome": exporter.OutcomeTruncated}); n != 1 {
			t.Errorf("%s truncated = %v, want 1: a frame the budget could not hold was not measured", config, n)
		}
	}
	if got := r.value(t, exporter.MetricBufferedBytes, nil); got != 0 {
		t.Errorf("%v bytes still held", got)
	}
}

// TestStalledBodyConnectionIsClosedAfterItsAnswer: after the 408, tandem
// does not wait for the rest of a stalled body (Go's server would, with no
// deadline, for up to 256 KiB).
func TestStalledBodyConnectionIsClosedAfterItsAnswer(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_BODY_READ_TIMEOUT": "1s"})
	addr := strings.TrimPrefix(r.front.URL, "http://")
	for _, path := range []string{"/v1/chat/completions", "/v1/other"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"a\"")
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(conn) // returns when tandem closes the connection
		conn.Close()
		if err != nil {
			t.Fatalf("%s: connection still open 20 s after the stall (%v); read %q", path, err, got)
		}
		if !strings.HasPrefix(string(got), "HTTP/1.1 408") {
			t.Errorf("%s: answered %.40q, want 408", path, got)
		}
	}
}

// TestArmHeadersAreBounded: an arm answering with huge headers is cut at
// 64 KiB (each of its shadows would otherwise hold up to Go's 10 MiB) and
// the log says why; production is unaffected.
func TestArmHeadersAreBounded(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Pad", strings.Repeat("p", 1<<20))
		w.WriteHeader(http.StatusOK)
	}))
	defer huge.Close()
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	r.server.arms[1].url = mustParse(t, huge.URL)
	if _, body := post(t, r.front.URL, chatBody, nil); string(body) != testupstream.StreamBody(3) {
		t.Fatalf("production answer changed: %q", body)
	}
	r.idle()
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "B", "class": "fresh", "outcome": exporter.OutcomeError}); n != 1 {
		t.Errorf("B error = %v, want 1", n)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "header") {
		t.Errorf("the log does not say B's headers were too large:\n%s", logs)
	}
}

// TestRequestTrailersReachProduction: a chunked body's trailers reach
// production on every path, read whole by tandem or passed through.
func TestRequestTrailersReachProduction(t *testing.T) {
	got := make(chan string, 4)
	prod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got <- r.Trailer.Get("X-Checksum")
	}))
	defer prod.Close()
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	r.server.primary.url = mustParse(t, prod.URL)
	addr := strings.TrimPrefix(r.front.URL, "http://")
	for _, path := range []string{"/v1/chat/completions", "/v1/other"} {
		raw := "POST " + path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\nConnection: close\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n", len(chatBody), chatBody) + "0\r\nX-Checksum: c0ffee\r\n\r\n"
		rawExchange(t, addr, raw, false)
		if trailer := <-got; trailer != "c0ffee" {
			t.Errorf("%s: production got trailer %q, want c0ffee", path, trailer)
		}
	}
	r.idle()
}

// endThenFail is a response body that yields data, then fails with err.
type endThenFail struct {
	data []byte
	err  error
}

func (b *endThenFail) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *endThenFail) Close() error { return nil }

type fixedTransport struct{ body io.ReadCloser }

func (f fixedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: f.body, Request: req}, nil
}

// TestStreamEndedBeforeTheCutIsComplete: a client that hangs up as soon as
// it has read [DONE] (the official SDKs do) cancels the read of what
// follows; the stream had ended, so the request is completed, whether the
// read fails or the body is closed first.
func TestStreamEndedBeforeTheCutIsComplete(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		close bool // close instead of reading to the error
		want  string
	}{
		{"read fails after [DONE]", testupstream.StreamBody(3), false, exporter.OutcomeCompleted},
		{"closed after [DONE]", testupstream.StreamBody(3), true, exporter.OutcomeCompleted},
		{"read fails before [DONE]", strings.TrimSuffix(testupstream.StreamBody(3), "data: [DONE]\n\n"), false, exporter.OutcomeCanceled},
		{"closed before [DONE]", strings.TrimSuffix(testupstream.StreamBody(3), "data: [DONE]\n\n"), true, exporter.OutcomeCanceled},
	} {
		var got exporter.Observation
		m := newMeasurement(sse.APIChatCompletions, nil, func(_ time.Time, o exporter.Observation) { got = o })
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/v1/chat/completions", nil)
		resp, err := m.handOff(fixedTransport{&endThenFail{data: []byte(tc.body), err: context.Canceled}}, req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(tc.body))
		io.ReadFull(resp.Body, buf)
		cancel()
		if tc.close {
			resp.Body.Close()
		} else {
			io.ReadAll(resp.Body)
		}
		if got.Outcome != tc.want {
			t.Errorf("%s: outcome %q, want %q", tc.name, got.Outcome, tc.want)
		}
	}
}
