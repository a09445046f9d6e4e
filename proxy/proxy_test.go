package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
	"github.com/kestrelops/tandem/proxy/sse"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// rig is a proxy in front of three fake upstreams.
type rig struct {
	prod, a, b *testupstream.Server
	server     *Server
	front      *httptest.Server
	reg        *prometheus.Registry
	logs       *syncBuffer // tandem's log, at debug level
	handlers   sync.WaitGroup
}

func newRig(t *testing.T, prod, a, b testupstream.Script, env map[string]string) *rig {
	t.Helper()
	r := &rig{prod: testupstream.New(prod), a: testupstream.New(a), b: testupstream.New(b), reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	vars := map[string]string{
		"TANDEM_PRIMARY_URL": r.prod.URL,
		"TANDEM_A_URL":       r.a.URL,
		"TANDEM_B_URL":       r.b.URL,
		"TANDEM_SAMPLE_RATE": "1",
		"TANDEM_SAMPLE_BY":   "request",
		"TANDEM_A_API_KEY":   "key-for-a",
		"TANDEM_B_API_KEY":   "key-for-b",
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(vars))
	if err != nil {
		t.Fatal(err)
	}
	m := exporter.New(r.reg, cfg.Classes(), nil, "test", "test")
	r.server, err = New(cfg, m, nil, slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	r.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.handlers.Add(1)
		defer r.handlers.Done()
		r.server.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		r.front.Close()
		r.server.Shutdown()
		r.prod.Close()
		r.a.Close()
		r.b.Close()
	})
	return r
}

// waitValue waits until the series reaches want: classification and
// mirroring run beside production, so they may finish after the client's
// response did.
func (r *rig) waitValue(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !r.has(t, name, labels) || r.value(t, name, labels) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v after 10s, want %v", name, labels, r.value(t, name, labels), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// has reports whether the series exists yet: one not created up front
// (an arm's, a skip reason's) appears with its first value.
func (r *rig) has(t *testing.T, name string, labels map[string]string) bool {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && labelsMatch(m, labels) {
				return true
			}
		}
	}
	return false
}

// idle waits until every request has been recorded. A client can have its
// whole answer before tandem reads the end of production's body, which ends
// the measurement: first the handlers, then what they started.
func (r *rig) idle() {
	r.handlers.Wait()
	r.server.background.Wait()
}

// value returns the value of the counter or gauge name with exactly labels,
// or the sample count of a histogram.
func (r *rig) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

const chatBody = `{"model":"m","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi"}]}`

func post(t *testing.T, url, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, got
}

func TestProductionResponseIsByteIdentical(t *testing.T) {
	r := newRig(t, testupstream.Script{Tokens: 5}, testupstream.Script{}, testupstream.Script{}, nil)
	direct, directBody := post(t, r.prod.URL, chatBody, nil)
	proxied, proxiedBody := post(t, r.front.URL, chatBody, nil)
	if !bytes.Equal(directBody, proxiedBody) {
		t.Fatalf("body through tandem differs:\n got %q\nwant %q", proxiedBody, directBody)
	}
	if string(proxiedBody) != testupstream.StreamBody(5) {
		t.Fatalf("unexpected stream %q", proxiedBody)
	}
	if proxied.StatusCode != direct.StatusCode {
		t.Fatalf("status %d, want %d", proxied.StatusCode, direct.StatusCode)
	}
	for _, h := range []string{"Content-Type", "Cache-Control"} {
		if proxied.Header.Get(h) != direct.Header.Get(h) {
			t.Errorf("header %s = %q, want %q", h, proxied.Header.Get(h), direct.Header.Get(h))
		}
	}
	// The request production received is the client's, byte for byte.
	got := r.prod.Received()
	if len(got) != 2 || !bytes.Equal(got[1].Body, []byte(chatBody)) {
		t.Fatalf("production received %d requests, last body %q", len(got), got[len(got)-1].Body)
	}
	r.idle()
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "completed"}); n != 1 {
		t.Errorf("production completed = %v, want 1", n)
	}
	if n := r.value(t, exporter.MetricOutputTokens, map[string]string{"config": "production", "class": "fresh"}); n != 5 {
		t.Errorf("production output tokens = %v, want 5", n)
	}
}

func TestProductionNotHeldBackByHangingShadow(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{}, testupstream.Script{Release: release}, testupstream.Script{}, nil)

	_, body := post(t, r.front.URL, chatBody, nil)
	// A has the request but has not answered: production finished first.
	select {
	case <-r.a.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("A never received the mirrored request")
	}
	if string(body) != testupstream.StreamBody(3) {
		t.Fatalf("production body %q", body)
	}
	if n := r.value(t, exporter.MetricShadowInFlight, map[string]string{"config": "A"}); n != 1 {
		t.Fatalf("A in flight = %v while production already answered, want 1", n)
	}
	close(release)
	r.idle()
	if n := r.value(t, exporter.MetricPairs, map[string]string{"class": "fresh", "result": "both_completed"}); n != 1 {
		t.Errorf("both_completed pairs = %v, want 1", n)
	}
}

func TestOverloadedArmSkipsBoth(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{}, testupstream.Script{Release: release}, testupstream.Script{},
		map[string]string{"TANDEM_SHADOW_MAX_IN_FLIGHT": "1"})
	post(t, r.front.URL, chatBody, nil)
	<-r.a.Arrived()
	<-r.b.Arrived()
	// A still holds its only slot; B is free, but must not get the request either.
	post(t, r.front.URL, chatBody, nil)
	r.waitValue(t, exporter.MetricMirrorSkipped, map[string]string{"reason": "overloaded"}, 1)
	close(release)
	r.idle()
	if n := len(r.b.Received()); n != 1 {
		t.Errorf("B received %d requests, want 1 (the second was skipped for both)", n)
	}
	if n := len(r.a.Received()); n != 1 {
		t.Errorf("A received %d requests, want 1", n)
	}
	if n := r.value(t, exporter.MetricMirrorSkipped, map[string]string{"reason": "overloaded"}); n != 1 {
		t.Errorf("overloaded skips = %v, want 1", n)
	}
	if n := len(r.prod.Received()); n != 2 {
		t.Errorf("production received %d requests, want 2", n)
	}
}

// productionMirrors collects the Mirror field of r's production records.
func productionMirrors(r *rig) func() []string {
	var mu sync.Mutex
	var mirrors []string
	r.server.observeHook = func(rec record.Record) {
		if rec.Config == exporter.ConfigProduction {
			mu.Lock()
			defer mu.Unlock()
			mirrors = append(mirrors, rec.Mirror)
		}
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(mirrors))
	}
}

// TestProductionRecordsSayWhatBecameOfTheMirror: the records carry the
// skipped share of sampled requests, as the metrics do.
func TestProductionRecordsSayWhatBecameOfTheMirror(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{}, testupstream.Script{Release: release}, testupstream.Script{},
		map[string]string{"TANDEM_SHADOW_MAX_IN_FLIGHT": "1"})
	mirrors := productionMirrors(r)
	post(t, r.front.URL, chatBody, nil)
	<-r.a.Arrived()
	post(t, r.front.URL, chatBody, nil)
	r.waitValue(t, exporter.MetricMirrorSkipped, map[string]string{"reason": "overloaded"}, 1)
	close(release)
	r.idle()
	if got, want := mirrors(), []string{record.MirrorMirrored, record.Skipped(exporter.SkipOverloaded)}; !slices.Equal(got, want) {
		t.Errorf("production records' mirror = %q, want %q", got, want)
	}

	unsampled := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_SAMPLE_RATE": "0"})
	mirrors = productionMirrors(unsampled)
	post(t, unsampled.front.URL, chatBody, nil)
	unsampled.idle()
	if got, want := mirrors(), []string{record.MirrorNotSampled}; !slices.Equal(got, want) {
		t.Errorf("unsampled production record's mirror = %q, want %q", got, want)
	}
}

func TestShadowsGetOnlyTheirOwnCredentials(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_B_MODEL": "b-model"})
	h := http.Header{"Authorization": {"Bearer client-secret"}, "Cookie": {"session=abc"}, "X-Team": {"search"}}
	post(t, r.front.URL, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, h)
	r.idle()

	prod := r.prod.Received()[0]
	if prod.Header.Get("Authorization") != "Bearer client-secret" || prod.Header.Get("Cookie") != "session=abc" || prod.Header.Get("X-Team") != "search" {
		t.Errorf("production lost client headers: %v", prod.Header)
	}
	for _, arm := range []struct {
		name string
		up   *testupstream.Server
		key  string
	}{{"A", r.a, "Bearer key-for-a"}, {"B", r.b, "Bearer key-for-b"}} {
		got := arm.up.Received()
		if len(got) != 1 {
			t.Fatalf("%s received %d requests", arm.name, len(got))
		}
		if auth := got[0].Header.Get("Authorization"); auth != arm.key {
			t.Errorf("%s Authorization = %q, want %q", arm.name, auth, arm.key)
		}
		for _, h := range []string{"Cookie", "X-Team"} {
			if v := got[0].Header.Get(h); v != "" {
				t.Errorf("%s received client header %s=%q", arm.name, h, v)
			}
		}
		var body struct {
			Model         string `json:"model"`
			Stream        bool   `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(got[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		if !body.Stream || !body.StreamOptions.IncludeUsage {
			t.Errorf("%s body not forced to stream with usage: %s", arm.name, got[0].Body)
		}
		wantModel := map[string]string{"A": "m", "B": "b-model"}[arm.name]
		if body.Model != wantModel {
			t.Errorf("%s model = %q, want %q", arm.name, body.Model, wantModel)
		}
	}
}

func TestUnmirrorableBodiesReachProductionUntouched(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_MIRROR_MAX_BODY_BYTES": "200"})
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	for _, tc := range []struct{ body, reason string }{
		{big, exporter.SkipBodyTooLarge},
		{`{"model":"m","messages":[`, exporter.SkipInvalidBody},
		{`[1,2,3]`, exporter.SkipInvalidBody},
	} {
		post(t, r.front.URL, tc.body, nil)
		got := r.prod.Received()
		if last := got[len(got)-1].Body; string(last) != tc.body {
			t.Errorf("production received %d bytes, want the %d sent", len(last), len(tc.body))
		}
	}
	r.idle()
	if n := r.value(t, exporter.MetricMirrorSkipped, map[string]string{"reason": exporter.SkipBodyTooLarge}); n != 1 {
		t.Errorf("body_too_large = %v, want 1", n)
	}
	if n := r.value(t, exporter.MetricMirrorSkipped, map[string]string{"reason": exporter.SkipInvalidBody}); n != 2 {
		t.Errorf("invalid_body = %v, want 2", n)
	}
	if len(r.a.Received())+len(r.b.Received()) != 0 {
		t.Error("an unmirrorable body reached an arm")
	}
}

func TestOversizeBodyWithoutContentLengthIsStreamed(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_MIRROR_MAX_BODY_BYTES": "100"})
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("y", 1000) + `"}]}`
	req, _ := http.NewRequest(http.MethodPost, r.front.URL+"/v1/chat/completions", io.MultiReader(strings.NewReader(body)))
	req.ContentLength = -1 // chunked: tandem learns the size only by reading
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := r.prod.Received()[0].Body; string(got) != body {
		t.Fatalf("production received %d bytes, want %d", len(got), len(body))
	}
	if n := r.value(t, exporter.MetricMirrorSkipped, map[string]string{"reason": exporter.SkipBodyTooLarge}); n != 1 {
		t.Errorf("body_too_large = %v, want 1", n)
	}
}

func TestShadowOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a, b       testupstream.Script
		aOut, bOut string
		pair       string
	}{
		{"A errors", testupstream.Script{Status: 500}, testupstream.Script{}, exporter.OutcomeError, exporter.OutcomeCompleted, exporter.PairAFailed},
		{"B times out", testupstream.Script{}, testupstream.Script{Hang: true}, exporter.OutcomeCompleted, exporter.OutcomeTimeout, exporter.PairBFailed},
		{"B cut mid-stream", testupstream.Script{}, testupstream.Script{Tokens: 5, CutAfter: 2}, exporter.OutcomeCompleted, exporter.OutcomeIncomplete, exporter.PairBFailed},
		{"both 429", testupstream.Script{Status: 429}, testupstream.Script{Status: 429}, exporter.OutcomeError, exporter.OutcomeError, exporter.PairBothFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Both arms must answer within the shadow timeout: 300ms was missed under -race on a busy machine.
			r := newRig(t, testupstream.Script{}, tc.a, tc.b, map[string]string{"TANDEM_SHADOW_TIMEOUT": "2s"})
			_, body := post(t, r.front.URL, chatBody, nil)
			if string(body) != testupstream.StreamBody(3) {
				t.Fatalf("production body altered: %q", body)
			}
			r.idle()
			for config, outcome := range map[string]string{"A": tc.aOut, "B": tc.bOut} {
				if n := r.value(t, exporter.MetricRequests, map[string]string{"config": config, "class": "fresh", "outcome": outcome}); n != 1 {
					t.Errorf("%s %s = %v, want 1", config, outcome, n)
				}
			}
			if n := r.value(t, exporter.MetricPairs, map[string]string{"class": "fresh", "result": tc.pair}); n != 1 {
				t.Errorf("pairs %s = %v, want 1", tc.pair, n)
			}
		})
	}
}

func TestClientDisconnectCancelsProduction(t *testing.T) {
	r := newRig(t, testupstream.Script{Hang: true}, testupstream.Script{}, testupstream.Script{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.front.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-r.prod.Arrived()
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "canceled"}) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("production request not counted as canceled after the client left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPrimaryDownGivesClearBadGateway(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	r.prod.Close()
	resp, body := post(t, r.front.URL, chatBody, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if !strings.Contains(string(body), "production upstream unreachable: dial: connect: connection refused") {
		t.Fatalf("body %q does not say what failed", body)
	}
	if host := strings.TrimPrefix(r.prod.URL, "http://"); strings.Contains(string(body), host) {
		t.Fatalf("body %q reveals production's address", body)
	}
	r.idle()
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": "error"}); n != 1 {
		t.Errorf("production error = %v, want 1", n)
	}
}

func TestRewriteBody(t *testing.T) {
	got, err := rewriteBody(sse.APIChatCompletions, []byte(`{"model":"x","stream_options":{"continuous_usage_stats":true},"n":1}`), "y")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"n":1,"stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":true},"model":"y"}`
	if string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestCompressedProductionResponsePassesUnmeasured(t *testing.T) {
	gz := []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff not really gzip, passed as bytes")
	prod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(gz)
	}))
	defer prod.Close()
	reg := prometheus.NewRegistry()
	cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(map[string]string{"TANDEM_PRIMARY_URL": prod.URL}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, exporter.New(reg, cfg.Classes(), nil, "test", "test"), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	r := &rig{reg: reg}
	resp, body := post(t, front.URL, chatBody, http.Header{"Accept-Encoding": {"gzip"}})
	if !bytes.Equal(body, gz) || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("compressed body altered: %q (Content-Encoding %q)", body, resp.Header.Get("Content-Encoding"))
	}
	for _, outcome := range exporter.Outcomes {
		if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "production", "class": "fresh", "outcome": outcome}); n != 0 {
			t.Errorf("a compressed response was measured as %s", outcome)
		}
	}
}

func TestShadowsGetNoClientQueryCredentials(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	resp, err := http.Post(r.front.URL+"/v1/chat/completions?api-version=2024-06-01&key=client-secret", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.idle()
	if q := r.prod.Received()[0].RawQuery; q != "api-version=2024-06-01&key=client-secret" {
		t.Errorf("production query %q, want the client's", q)
	}
	for name, up := range map[string]*testupstream.Server{"A": r.a, "B": r.b} {
		if q := up.Received()[0].RawQuery; q != "api-version=2024-06-01" {
			t.Errorf("%s query %q, want only api-version", name, q)
		}
	}
}

func TestCompressedShadowResponseCountsAsError(t *testing.T) {
	gzipArm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"))
	}))
	defer gzipArm.Close()
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, map[string]string{"TANDEM_B_URL": gzipArm.URL})
	post(t, r.front.URL, chatBody, nil)
	r.idle()
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": "B", "class": "fresh", "outcome": exporter.OutcomeError}); n != 1 {
		t.Errorf("B error = %v, want 1", n)
	}
	if n := r.value(t, exporter.MetricPairs, map[string]string{"class": "fresh", "result": exporter.PairBFailed}); n != 1 {
		t.Errorf("pairs b_failed = %v, want 1", n)
	}
}

// The arms' index learns only what the arms received: a prompt skipped as
// overloaded is still fresh for them when it is mirrored later.
func TestOverloadedRequestDoesNotTeachTheArmsIndex(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{}, testupstream.Script{Release: release}, testupstream.Script{},
		map[string]string{"TANDEM_SHADOW_MAX_IN_FLIGHT": "1", "TANDEM_REPEAT_MIN_BYTES": "0"})
	post(t, r.front.URL, `{"model":"m","messages":[{"role":"user","content":"an unrelated first prompt"}]}`, nil)
	<-r.a.Arrived()
	post(t, r.front.URL, chatBody, nil)
	r.waitValue(t, exporter.MetricMirrorSkipped, map[string]string{"reason": exporter.SkipOverloaded}, 1)
	close(release)
	r.idle()
	post(t, r.front.URL, chatBody, nil)
	r.idle()
	for _, arm := range exporter.Arms {
		if n := r.value(t, exporter.MetricRequests, map[string]string{"config": arm, "class": exporter.ClassFresh, "outcome": exporter.OutcomeCompleted}); n != 2 {
			t.Errorf("%s saw %v fresh requests, want 2: it never received the skipped prompt", arm, n)
		}
	}
	if n := r.value(t, exporter.MetricRequests, map[string]string{"config": exporter.ConfigProduction, "class": exporter.ClassRepeatedPrefix, "outcome": exporter.OutcomeCompleted}); n != 1 {
		t.Errorf("production repeated_prefix = %v, want 1", n)
	}
}

// vLLM and SGLang report a failure mid-stream as an error frame followed by
// [DONE]; the stream ended, but the request did not complete.
func TestErrorFrameInStreamIsAnError(t *testing.T) {
	failing := testupstream.Script{Frames: []string{
		`data: {"choices":[{"index":0,"delta":{"content":"partial"}}]}` + "\n\n",
		`data: {"error":{"object":"error","message":"engine failed","type":"InternalServerError","code":500}}` + "\n\n",
		"data: [DONE]\n\n",
	}}
	r := newRig(t, failing, testupstream.Script{}, failing, nil)
	post(t, r.front.URL, chatBody, nil)
	r.idle()
	for config, outcome := range map[string]string{exporter.ConfigProduction: exporter.OutcomeError, exporter.ConfigA: exporter.OutcomeCompleted, exporter.ConfigB: exporter.OutcomeError} {
		if n := r.value(t, exporter.MetricRequests, map[string]string{"config": config, "class": "fresh", "outcome": outcome}); n != 1 {
			t.Errorf("%s %s = %v, want 1", config, outcome, n)
		}
	}
	if n := r.value(t, exporter.MetricPairs, map[string]string{"class": "fresh", "result": exporter.PairBFailed}); n != 1 {
		t.Errorf("pairs b_failed = %v, want 1", n)
	}
}

// TestProductionAnsweringBeforeTheWholeBody sends an oversized (streamed)
// body to a production that starts its answer after reading only part of
// it, from a client that sends the rest only once the answer has started.
// The rest must still reach production, and the answer the client: Go's
// HTTP/1 server, by default, consumes what is left of a request body before
// the handler's response starts, which here would stall the response and
// elsewhere cuts the request to production (golang/go#40747).
func TestProductionAnsweringBeforeTheWholeBody(t *testing.T) {
	early := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		head := make([]byte, 1024)
		n, _ := io.ReadFull(r.Body, head)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
		http.NewResponseController(w).Flush()
		rest, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "data: {\"received\":%d,\"err\":%q}\n\ndata: [DONE]\n\n", n+len(rest), fmt.Sprint(err))
	}))
	defer early.Close()
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_PRIMARY_URL": early.URL, "TANDEM_MIRROR_MAX_BODY_BYTES": "200"})

	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("z", 64<<10) + `"}]}`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := make(chan struct{})
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(body[:4096]))
		select {
		case <-started:
			pw.Write([]byte(body[4096:]))
			pw.Close()
		case <-ctx.Done():
			pw.CloseWithError(ctx.Err())
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.front.URL+"/v1/chat/completions", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no response before the whole body was sent: %v", err)
	}
	close(started)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	want := fmt.Sprintf(`"received":%d,"err":"<nil>"`, len(body))
	if err != nil || !strings.Contains(string(got), want) || !strings.HasSuffix(string(got), "data: [DONE]\n\n") {
		t.Fatalf("response %.300q, read error %v; want production to receive all %d bytes and the stream to end", got, err, len(body))
	}
}
