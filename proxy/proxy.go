// Package proxy is tandem's request path: every request goes to production
// unchanged, and a sampled share of LLM requests is mirrored, at the same
// moment, to configurations A and B, whose responses are measured and
// discarded. Production, A and B are measured by one code path.
package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/classify"
	"github.com/kestrelops/tandem/proxy/record"
	"github.com/kestrelops/tandem/proxy/sse"
)

// Server is the proxy handler.
type Server struct {
	cfg     Config
	metrics *exporter.Metrics
	records *record.Writer // nil when not recording
	log     *slog.Logger

	primary *upstream
	arms    []*upstream // A then B; empty when not mirroring
	reverse *httputil.ReverseProxy

	prodIndex    *classify.Index // every request
	mirrorIndex  *classify.Index // mirrored requests only: what A and B have seen
	sampler      *classify.Sampler
	allowedClass map[string]bool

	shadowCtx   context.Context
	stopShadows context.CancelFunc
	// background counts classification, mirroring and measurement work
	// that runs beside the production request.
	background sync.WaitGroup
}

// New builds the proxy from a validated Config. records may be nil.
func New(cfg Config, m *exporter.Metrics, records *record.Writer, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, metrics: m, records: records, log: log, allowedClass: map[string]bool{}}
	var err error
	if s.primary, err = newUpstream(exporter.ConfigProduction, cfg.PrimaryURL, "", "", 0); err != nil {
		return nil, err
	}
	if cfg.Mirroring() {
		a, err := newUpstream(exporter.ConfigA, cfg.AURL, cfg.AAPIKey, cfg.AModel, cfg.ShadowMaxInFlight)
		if err != nil {
			return nil, err
		}
		b, err := newUpstream(exporter.ConfigB, cfg.BURL, cfg.BAPIKey, cfg.BModel, cfg.ShadowMaxInFlight)
		if err != nil {
			return nil, err
		}
		s.arms = []*upstream{a, b}
	}
	for _, c := range cfg.ExtraClasses {
		s.allowedClass[c] = true
	}
	s.prodIndex = classify.NewIndex(cfg.ClassifierOptions(), time.Now)
	s.mirrorIndex = classify.NewIndex(cfg.ClassifierOptions(), time.Now)
	if cfg.SampleBy == "request" {
		s.sampler = classify.NewRequestSampler(cfg.SampleRate, rand.Float64)
	} else {
		s.sampler = classify.NewConversationSampler(cfg.SampleRate)
	}
	s.shadowCtx, s.stopShadows = context.WithCancel(context.Background())
	s.reverse = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(s.primary.url)
			// Rewrite drops forwarding headers; production gets the client's own.
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
		},
		Transport:     measuredTransport{next: s.primary.transport},
		FlushInterval: -1,
		BufferPool:    bufferPool{},
		ErrorHandler:  s.productionError,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

func newUpstream(config, rawURL string, key Secret, model string, maxInFlight int) (*upstream, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s URL: %w", config, err)
	}
	up := &upstream{config: config, url: u, apiKey: key, model: model, transport: NewTransport()}
	if maxInFlight > 0 {
		up.slots = make(chan struct{}, maxInFlight)
	}
	return up, nil
}

// Shutdown cancels mirrored requests still in flight (they are counted as
// canceled) and waits until every measurement is recorded. Call it after the
// HTTP server has stopped serving.
func (s *Server) Shutdown() {
	s.stopShadows()
	s.background.Wait()
}

// ServeHTTP sends r to production and, when sampled, mirrors it to A and B.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A body tandem does not read whole goes to production as it arrives.
	// Without full duplex, Go's HTTP/1 server consumes the rest of it once
	// production's answer starts, stalling the answer or cutting the
	// request to production (golang/go#40747). Only for a declared length:
	// in full duplex the server would keep the connection after a broken
	// chunked body and read its remains as the next request.
	if r.ContentLength > 0 {
		http.NewResponseController(w).EnableFullDuplex()
	}
	api, llm := sse.APIForPath(r.URL.Path)
	if !llm {
		s.reverse.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost || hasContentEncoding(r.Header) {
		s.skip(exporter.SkipUnsupported)
		s.reverse.ServeHTTP(w, r)
		return
	}
	body, whole, err := s.readBody(r)
	if !whole || err != nil {
		// Too large or unreadable: production gets every byte, untouched.
		if err == nil {
			s.skip(exporter.SkipBodyTooLarge)
		}
		s.reverse.ServeHTTP(w, r)
		return
	}
	// Classifying and mirroring run beside production: the production
	// request leaves as soon as its body is read.
	class := make(chan string, 1)
	classHeader, keyHeader := headerValue(r, s.cfg.ClassHeader), headerValue(r, s.cfg.SampleKeyHeader)
	in := *r.URL
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		class <- s.classifyAndMirror(api, &in, classHeader, keyHeader, body)
	}()

	m := newMeasurement(api, func(start time.Time, o exporter.Observation) {
		s.background.Add(1)
		go func() {
			defer s.background.Done()
			if c := <-class; c != "" {
				s.observe(exporter.ConfigProduction, c, "", start, o)
			}
		}()
	})
	s.reverse.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), measurementKey{}, &measuredRequest{m, body})))
}

// classifyAndMirror decides the request's production class and, when it is
// sampled, its class on the arms and sends it to them. It returns the
// production class, or "" when the body holds no prompt (not measured).
func (s *Server) classifyAndMirror(api sse.API, in *url.URL, classHeader, keyHeader string, body []byte) string {
	prompt, err := classify.ParsePrompt(body)
	if err != nil {
		s.skip(exporter.SkipInvalidBody)
		return ""
	}
	prodClass, _ := s.prodIndex.Classify(prompt.Text)
	if len(s.arms) > 0 && s.sampler.Sampled(keyHeader, prompt) && s.takeSlots() {
		mirrorClass, _ := s.mirrorIndex.Classify(prompt.Text)
		s.startMirror(api, in, classify.ClassFor(classHeader, s.allowedClass, mirrorClass), body)
	}
	return classify.ClassFor(classHeader, s.allowedClass, prodClass)
}

func headerValue(r *http.Request, name string) string {
	if name == "" {
		return ""
	}
	return r.Header.Get(name)
}

// readBody reads a mirrorable body of at most MirrorMaxBodyBytes. When the
// body is larger (whole is false) or reading fails, r.Body is replaced by a
// reader that yields every byte again, followed by the rest or the error.
func (s *Server) readBody(r *http.Request) (body []byte, whole bool, err error) {
	limit := s.cfg.MirrorMaxBodyBytes
	if r.ContentLength > limit {
		return nil, false, nil
	}
	body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil || int64(len(body)) > limit {
		r.Body = replayBody{Reader: io.MultiReader(bytes.NewReader(body), readerOrError(r.Body, err)), Closer: r.Body}
		return nil, false, err
	}
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true, nil
}

type replayBody struct {
	io.Reader
	io.Closer
}

func readerOrError(rest io.Reader, err error) io.Reader {
	if err != nil {
		return errReader{err}
	}
	return rest
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func hasContentEncoding(h http.Header) bool {
	ce := h.Get("Content-Encoding")
	return ce != "" && ce != "identity"
}

func (s *Server) skip(reason string) {
	if len(s.arms) > 0 {
		s.metrics.MirrorSkipped(reason)
	}
}

// productionError answers a failed production round trip. A client that went
// away gets nothing; otherwise a 502 that says what failed.
func (s *Server) productionError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return
	}
	s.log.Warn("production request failed", "path", r.URL.Path, "err", err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"tandem_upstream_error"}}`+"\n",
		"tandem: production upstream unreachable: "+clientReason(err))
}

// clientReason is what a client is told of a failed round trip: the cause
// without production's address, which stays in tandem's log.
func clientReason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Op + ": " + op.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "request failed"
}

// observe exports one measurement and writes its record.
func (s *Server) observe(config, class, pairID string, start time.Time, o exporter.Observation) {
	s.metrics.ObserveRequest(config, class, o)
	if s.records != nil {
		s.records.Write(record.New(start, config, class, pairID, o))
	}
}

// measuredTransport hands requests that carry a measuredRequest to its
// measurement, which stamps the start of the clock at the hand-off.
type measuredTransport struct{ next http.RoundTripper }

type measurementKey struct{}

// measuredRequest is what a measured production request carries in its
// context: its measurement and its body, read whole.
type measuredRequest struct {
	m    *measurement
	body []byte
}

func (t measuredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if mr, ok := req.Context().Value(measurementKey{}).(*measuredRequest); ok {
		return mr.m.handOff(t.next, withBodyInMemory(req, mr.body))
	}
	return t.next.RoundTrip(req)
}

// withBodyInMemory returns a shallow copy of req whose body reads body, the
// same bytes as req.Body. ReverseProxy wraps the outgoing body in a reader
// http.Transport does not know to be in memory, and the transport then
// writes the headers and the body in two writes (two TCP segments) instead
// of one.
func withBodyInMemory(req *http.Request, body []byte) *http.Request {
	if req.Body == nil {
		return req
	}
	out := *req
	out.Body = io.NopCloser(bytes.NewReader(body))
	return &out
}

// bufferPool recycles the copy buffers of the reverse proxy. A buffer is
// held for the whole life of a stream, and stream frames are far smaller
// than a buffer, so buffers are 8 KiB (nginx's proxy_buffer_size on most
// platforms) rather than ReverseProxy's default 32 KiB.
type bufferPool struct{}

const copyBufferBytes = 8 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferBytes); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
