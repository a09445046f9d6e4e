package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

func TestClientCredentialsNeverReachArms(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	// Proxy-Authorization is hop-by-hop: the reverse proxy keeps it from
	// production too.
	hopByHop := "Proxy-Authorization"
	secrets := http.Header{
		"Authorization":        {"Bearer sk-client-authorization"},
		"Proxy-Authorization":  {"Basic cHJveHktc2VjcmV0"},
		"Cookie":               {"session=client-cookie"},
		"X-Api-Key":            {"client-x-api-key"},
		"Api-Key":              {"client-azure-api-key"},
		"Openai-Organization":  {"org-client-secret"},
		"Openai-Project":       {"proj-client-secret"},
		"X-Goog-Api-Key":       {"client-goog-key"},
		"X-Amz-Security-Token": {"client-amz-token"},
		"X-Forwarded-For":      {"10.1.2.3"},
	}
	post(t, r.front.URL, chatBody, secrets)
	r.idle()

	prod := r.prod.Received()[0]
	for name, v := range secrets {
		if name == hopByHop {
			continue
		}
		if got := prod.Header.Values(name); !slices.Equal(got, v) {
			t.Errorf("production %s = %q, want the client's %q", name, got, v)
		}
	}
	// The only headers an arm may see: what tandem sets and what Go's
	// transport adds.
	allowed := map[string]bool{"Content-Type": true, "Accept": true, "User-Agent": true,
		"Authorization": true, "Content-Length": true, "Accept-Encoding": true}
	for arm, fake := range map[string]*testupstream.Server{"A": r.a, "B": r.b} {
		got := fake.Received()
		if len(got) != 1 {
			t.Fatalf("%s received %d requests, want 1", arm, len(got))
		}
		for name, values := range got[0].Header {
			if !allowed[name] {
				t.Errorf("%s received header %s: %q", arm, name, values)
			}
			for _, v := range values {
				for _, secret := range secrets {
					if strings.Contains(v, secret[0]) {
						t.Errorf("%s received the client's %q in %s", arm, secret[0], name)
					}
				}
			}
		}
		if want := "Bearer key-for-" + strings.ToLower(arm); got[0].Header.Get("Authorization") != want {
			t.Errorf("%s Authorization = %q, want its own key", arm, got[0].Header.Get("Authorization"))
		}
	}
}

func TestMetricsPathGoesToProduction(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	direct, err := http.Get(r.prod.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(direct.Body)
	direct.Body.Close()

	resp, err := http.Get(r.front.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, want) || bytes.Contains(got, []byte("tandem_")) {
		t.Errorf("tandem answered /metrics itself: %q, want production's %q", got, want)
	}
	received := r.prod.Received()
	if len(received) != 2 || received[1].Path != "/metrics" || received[1].Method != http.MethodGet {
		t.Errorf("production did not receive GET /metrics through tandem: %+v", received)
	}
	r.idle()
	if n := len(r.a.Received()) + len(r.b.Received()); n != 0 {
		t.Errorf("arms received %d requests for /metrics", n)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPromptNeverLeaves sends a canary in the prompt and hostile headers, with
// arms failing and production going down, and looks for it in every output
// tandem has: logs at debug level, metrics and records.
func TestPromptNeverLeaves(t *testing.T) {
	const canary = "CANARY-b7e1f0c3-prompt-text"
	r := newRig(t, testupstream.Script{}, testupstream.Script{Status: 500}, testupstream.Script{Tokens: 4, CutAfter: 1},
		map[string]string{"TANDEM_CLASS_HEADER": "X-Class", "TANDEM_EXTRA_CLASSES": "batch", "TANDEM_SAMPLE_KEY_HEADER": "X-Conversation"})
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	path := filepath.Join(t.TempDir(), "records.jsonl")
	records, err := record.NewWriter(path, record.WriterOptions{MaxBytes: 1 << 20, MaxFiles: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Before the first request: the rig's server logs nowhere and records
	// nothing.
	r.server.log, r.server.records = logger, records
	r.server.reverse.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)

	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + canary + ` please"}]}`
	hostile := http.Header{"X-Class": {canary}, "X-Conversation": {canary}}
	post(t, r.front.URL, body, hostile)
	post(t, r.front.URL, `{"model":"m","messages":[{"role":"user","content":"`+canary, hostile)
	r.prod.Close()
	if resp, _ := post(t, r.front.URL, body, hostile); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d with production down, want 502", resp.StatusCode)
	}
	r.idle()
	if err := records.Close(); err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(logs.String(), "production request failed") {
		t.Fatalf("log capture saw nothing: %q", logs.String())
	}
	if strings.Contains(logs.String(), canary) {
		t.Errorf("prompt text in logs:\n%s", logs.String())
	}
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exposition bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&exposition, mf); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(exposition.String(), canary) {
		t.Errorf("prompt text in metrics")
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, stats, err := record.ReadFiles(path); err != nil || len(got) != 6 || stats.Skipped != 0 {
		t.Fatalf("%d records (%v, %+v), want 6 (production 2, A 2, B 2; the invalid body is not measured):\n%s", len(got), err, stats, written)
	}
	if bytes.Contains(written, []byte(canary)) {
		t.Errorf("prompt text in records:\n%s", written)
	}
}

// TestHostileLabelValuesCreateNoSeries sends 1,000 distinct model names and
// class header values outside the allowlist: no new series, and every label
// value stays in its fixed set.
func TestHostileLabelValuesCreateNoSeries(t *testing.T) {
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{},
		map[string]string{"TANDEM_CLASS_HEADER": "X-Class", "TANDEM_EXTRA_CLASSES": "batch"})
	post(t, r.front.URL, chatBody, nil)
	post(t, r.front.URL, chatBody, http.Header{"X-Class": {"batch"}})
	r.idle()
	before := r.series(t)

	const hostile = 1000
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				body := fmt.Sprintf(`{"model":"model-%d-%x","stream":true,"messages":[{"role":"user","content":"hi %d"}]}`, i, i*7919, i)
				class := []string{fmt.Sprintf("class-%d", i), "BATCH", "batch;x", " FRESH", "repeated_prefix ", strings.Repeat("b", 10000)}[i%6]
				if err := postQuietly(r.front.URL, body, class); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range hostile {
		work <- i
	}
	close(work)
	wg.Wait()
	r.idle()

	after := r.series(t)
	if !slices.Equal(before, after) {
		t.Errorf("series changed under hostile input:\nbefore %d: %v\nafter %d: %v", len(before), before, len(after), after)
	}
	allowed := map[string][]string{
		exporter.LabelConfig:  exporter.Configs,
		exporter.LabelClass:   {exporter.ClassFresh, exporter.ClassRepeatedPrefix, "batch"},
		exporter.LabelOutcome: exporter.Outcomes,
		exporter.LabelResult:  exporter.PairResults,
		exporter.LabelReason:  slices.Concat(exporter.SkipReasons, exporter.RecordDropReasons),
	}
	for _, s := range after {
		labels := s[strings.Index(s, "{")+1 : len(s)-1]
		if labels == "" {
			continue
		}
		for _, label := range strings.Split(labels, ",") {
			name, value, _ := strings.Cut(label, "=")
			if !slices.Contains(allowed[name], value) {
				t.Errorf("series %s has label %s=%q outside its fixed set", s, name, value)
			}
		}
	}
	if n := r.total(t, exporter.MetricRequests, map[string]string{"config": "production"}); n != hostile+2 {
		t.Errorf("production measured %v requests, want %d", n, hostile+2)
	}
}

// postQuietly posts a chat request with class in X-Class and reads the
// response; it may run on any goroutine.
func postQuietly(url, body, class string) error {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Class", class)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// series lists every tandem series except build info, as name{label=value,...}.
func (r *rig) series(t *testing.T) []string {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() == exporter.MetricBuildInfo {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, mf.GetName()+"{"+strings.Join(labels, ",")+"}")
		}
	}
	slices.Sort(out)
	return out
}

// TestSmugglingIsAnsweredAsGoAndNeverMirrored sends request-smuggling style
// bytes over a raw connection, to tandem and to a plain httputil.ReverseProxy:
// tandem must answer with the same statuses, production must receive what
// the plain proxy's backend received, and the arms nothing. Go's server
// refuses ambiguous framing or settles it (Transfer-Encoding wins, bytes after
// the body are the next request), so what reaches production is unambiguous.
func TestSmugglingIsAnsweredAsGoAndNeverMirrored(t *testing.T) {
	chat := `{"model":"m","stream":true,"messages":[{"role":"user","content":"smuggled"}]}`
	inner := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		fmt.Sprint(len(chat)) + "\r\n\r\n" + chat
	smuggled := "GET /internal/admin HTTP/1.1\r\nHost: x\r\n\r\n"
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	cases := []struct {
		name, raw string
		// brokenBody: Go fails the body mid-read; whether the backend sees
		// the aborted request's headers is a race, so only statuses count.
		brokenBody bool
	}{
		{"CL.TE: chunked end hides a request counted by Content-Length",
			head + "Content-Length: " + fmt.Sprint(len("0\r\n\r\n"+smuggled)) + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, false},
		{"TE.CL: a chunk carries a request, Content-Length is short",
			head + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(inner), inner), false},
		{"two different Content-Lengths",
			head + "Content-Length: 4\r\nContent-Length: " + fmt.Sprint(len(chat)) + "\r\n\r\n" + chat, false},
		{"Content-Length shorter than the body",
			head + "Content-Length: 5\r\n\r\n" + chat, false},
		{"Content-Length with a sign", head + "Content-Length: +" + fmt.Sprint(len(chat)) + "\r\n\r\n" + chat, false},
		{"Transfer-Encoding gzip, chunked", head + "Transfer-Encoding: gzip, chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(chat), chat), false},
		{"Transfer-Encoding xchunked", head + "Transfer-Encoding: xchunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(chat), chat), false},
		{"space before the colon", head + "Transfer-Encoding : chunked\r\nContent-Length: " + fmt.Sprint(len(chat)) + "\r\n\r\n" + chat, false},
		{"folded Content-Length", head + "Content-Length: 4\r\n " + fmt.Sprint(len(chat)) + "\r\n\r\n" + chat, false},
		{"chunk size overflow", head + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffff1\r\n" + chat + "\r\n0\r\n\r\n", true},
	}

	backend := testupstream.New(testupstream.Script{})
	defer backend.Close()
	plain := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:  func(pr *httputil.ProxyRequest) { pr.SetURL(mustParse(t, backend.URL)) },
		ErrorLog: log.New(io.Discard, "", 0),
	})
	defer plain.Close()
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)

	accepted := 0
	for _, tc := range cases {
		backend.Forget()
		r.prod.Forget()
		want := exchange(t, plain.Listener.Addr().String(), tc.raw)
		got := exchange(t, r.front.Listener.Addr().String(), tc.raw)
		if tc.brokenBody {
			// A body that breaks mid-read is the client's fault: tandem
			// answers 400 where the plain proxy blames the backend (502).
			want = slices.Clone(want)
			for i, status := range want {
				if status == http.StatusBadGateway {
					want[i] = http.StatusBadRequest
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: tandem answered %v, a plain reverse proxy %v (502 read as 400 for a broken body)", tc.name, got, want)
		}
		if tc.brokenBody {
			continue
		}
		forwarded, behindPlain := requestsOf(r.prod), requestsOf(backend)
		if !slices.Equal(forwarded, behindPlain) {
			t.Errorf("%s: production received %q\nbehind a plain reverse proxy: %q", tc.name, forwarded, behindPlain)
		}
		accepted += len(behindPlain)
	}
	r.idle()
	if accepted == 0 {
		t.Error("Go accepted no request; the comparison proves nothing about forwarding")
	}
	if n := len(r.a.Received()) + len(r.b.Received()); n != 0 {
		t.Errorf("arms received %d smuggling-style requests", n)
	}
}

// requestsOf lists the method, path and body of every request u received.
func requestsOf(u *testupstream.Server) []string {
	var out []string
	for _, rec := range u.Received() {
		out = append(out, rec.Method+" "+rec.Path+" "+string(rec.Body))
	}
	return out
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// exchange writes raw to addr, followed by a last request that asks the
// server to close, and returns the status of every response read until the
// server closes the connection.
func exchange(t *testing.T, addr, raw string) []int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw+"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	var statuses []int
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return statuses
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
}
