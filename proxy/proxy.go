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
	"sync/atomic"
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
	// observeHook, when set (in tests), is given every record.
	observeHook func(record.Record)
	log         *slog.Logger

	primary *upstream
	arms    []*upstream // A then B; empty when not mirroring
	reverse *httputil.ReverseProxy

	prodIndex    classifier      // every request
	mirrorIndex  classifier      // mirrored requests only: what A and B have seen
	sharedIndex  *classify.Redis // nil unless TANDEM_CLASSIFIER_REDIS_URL is set
	sampler      *classify.Sampler
	allowedClass map[string]bool

	budget      *byteBudget // bytes held for measurement
	shadowRate  *rateBudget // bytes per second read from the arms
	armFailures map[string]*failureLog

	shadowCtx   context.Context
	stopShadows context.CancelFunc
	// background counts classification, mirroring and measurement work
	// that runs beside the production request.
	background sync.WaitGroup
}

// New builds the proxy from cfg, which LoadConfig (or the loader of a
// configuration embedding it) has validated. records may be nil.
func New(cfg Config, m *exporter.Metrics, records *record.Writer, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, metrics: m, records: records, log: log, allowedClass: map[string]bool{},
		budget:      newByteBudget(cfg.MaxBufferedBytes, m.BufferedBytes()),
		shadowRate:  newRateBudget(cfg.ShadowReadRate, time.Now),
		armFailures: map[string]*failureLog{}}
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
		for _, arm := range s.arms {
			s.armFailures[arm.config] = newFailureLog(log, arm.config)
		}
	}
	for _, c := range cfg.ExtraClasses {
		s.allowedClass[c] = true
	}
	prodIndex := classify.NewIndex(cfg.ClassifierOptions(), time.Now)
	mirrorIndex := classify.NewIndex(cfg.ClassifierOptions(), time.Now)
	s.prodIndex, s.mirrorIndex = prodIndex, mirrorIndex
	if cfg.ClassifierRedisURL != "" {
		shared, err := classify.NewRedis(classify.RedisOptions{
			URL:        string(cfg.ClassifierRedisURL),
			Timeout:    cfg.ClassifierRedisTimeout,
			RetryAfter: redisRetryAfter,
			PoolSize:   redisPoolSize,
			Log:        log,
			OnFallback: m.ClassifierFallback,
		})
		if err != nil {
			return nil, fmt.Errorf("TANDEM_CLASSIFIER_REDIS_URL: %w", err)
		}
		s.sharedIndex = shared
		s.prodIndex = shared.Index(exporter.ConfigProduction, prodIndex)
		s.mirrorIndex = shared.Index("mirror", mirrorIndex)
	}
	if cfg.SampleBy == "request" {
		s.sampler = classify.NewRequestSampler(cfg.SampleRate, rand.Float64)
	} else {
		s.sampler = classify.NewConversationSampler(cfg.SampleRate)
	}
	s.shadowCtx, s.stopShadows = context.WithCancel(context.Background())
	s.reverse = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// ReverseProxy drops query parameters it cannot parse (a=1;b=2,
			// %zz); production gets the client's query as sent.
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			// The client's trailers arrive once its body has been read,
			// into In's map: share it, so they reach production too.
			pr.Out.Trailer = pr.In.Trailer
			pr.SetURL(s.primary.url)
			// Rewrite drops forwarding headers; production gets the client's own.
			for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
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

// classifier is a prefix index: the replica's own, or the one replicas share.
type classifier interface {
	Classify(prompt []byte) (class string, reuse float64)
}

// The shared index's connections, and how long a replica answers from its
// own index after Redis failed before it asks Redis again.
const redisPoolSize = 16

var redisRetryAfter = 2 * time.Second

func newUpstream(config, rawURL string, key Secret, model string, maxInFlight int) (*upstream, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s URL: %w", config, err)
	}
	transport := NewTransport()
	up := &upstream{config: config, url: u, apiKey: key, model: model, transport: transport}
	if maxInFlight > 0 {
		up.slots = make(chan struct{}, maxInFlight)
		transport.MaxResponseHeaderBytes = maxArmHeaderBytes
	}
	return up, nil
}

// Shutdown cancels mirrored requests still in flight (they are counted as
// canceled) and waits until every measurement is recorded. Call it after the
// HTTP server has stopped serving.
func (s *Server) Shutdown() {
	s.stopShadows()
	s.background.Wait()
	if s.sharedIndex != nil {
		s.sharedIndex.Close()
	}
}

// ServeHTTP sends r to production and, when sampled, mirrors it to A and B.
//
// Its own frame is kept small: the handler goroutine's stack, held for the
// whole life of a stream, grows to the depth reached when ReverseProxy
// writes the response headers, and a few hundred bytes more there double it
// (from 8 to 16 KiB). Everything before the hand-off runs in prepare.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, done := s.prepare(w, r)
	if r == nil {
		return
	}
	if done != nil {
		defer done()
	}
	s.reverse.ServeHTTP(w, r)
}

// prepare does everything ServeHTTP does before production gets the
// request: it returns the request to send, with done to call once the
// response has been relayed, or a nil request when it has answered r itself
// (tap mode, a failed client body).
//
//go:noinline
func (s *Server) prepare(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	// A body tandem does not read whole goes to production as it arrives.
	// Without full duplex, Go's HTTP/1 server consumes the rest of it once
	// production's answer starts, stalling the answer or cutting the
	// request to production (golang/go#40747). Only for a declared length:
	// in full duplex the server would keep the connection after a broken
	// chunked body and read its remains as the next request.
	if r.ContentLength > 0 {
		http.NewResponseController(w).EnableFullDuplex()
	}
	// One context value for all tandem keeps of the request: each
	// WithContext copies the request.
	var st *requestState
	if r.Body != nil && r.Body != http.NoBody {
		st = &requestState{body: &clientBody{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: s.cfg.BodyReadTimeout}}
		r = r.WithContext(context.WithValue(r.Context(), requestStateKey{}, st))
		r.Body = st.body
	}
	if s.cfg.Mode == ModeTap {
		s.serveTap(w, r)
		return nil, nil
	}
	api, llm := apiForPath(r.URL.Path)
	if !llm {
		return r, nil
	}
	if r.Method != http.MethodPost || hasContentEncoding(r.Header) {
		s.skip(exporter.SkipUnsupported)
		return r, nil
	}
	body, hold, skip := s.readBody(r)
	if err := bodyFailure(r); err != nil {
		s.clientError(w, r, err)
		return nil, nil
	}
	if hold == nil {
		// Too large or over budget: production gets every byte,
		// untouched, and the request is not measured.
		s.skip(skip)
		return r, nil
	}
	// Classifying and mirroring run beside production: the production
	// request leaves as soon as its body is read.
	class := s.classifyBeside(r, api, body, hold)

	m := newMeasurement(api, s.budget, func(start time.Time, o exporter.Observation) {
		s.background.Add(1)
		go func() {
			defer s.background.Done()
			if c := <-class; c.class != "" {
				s.observe(exporter.ConfigProduction, c.class, "", c.mirror, start, o)
			}
		}()
	})
	if st == nil {
		st = &requestState{}
		r = r.WithContext(context.WithValue(r.Context(), requestStateKey{}, st))
	}
	st.measured = measuredRequest{m, body}
	return r, hold.done
}

// requestState is what tandem keeps of a production request, in its
// context: its client body, and its measurement when it is measured.
type requestState struct {
	body     *clientBody     // nil for a request without a body
	measured measuredRequest // zero when not measured
}

type requestStateKey struct{}

// stateOf returns r's state, or nil.
func stateOf(r *http.Request) *requestState {
	st, _ := r.Context().Value(requestStateKey{}).(*requestState)
	return st
}

// classified is what became of a production request beside production:
// its class, "" when the body holds no prompt (not measured), and what
// became of it on the arms, as record.Record.Mirror says.
type classified struct{ class, mirror string }

// classifyBeside classifies and mirrors r, whose body is read, in a
// goroutine of its own, and delivers its classification on the channel; the
// goroutine gives back its share of hold.
func (s *Server) classifyBeside(r *http.Request, api sse.API, body []byte, hold *held) <-chan classified {
	class := make(chan classified, 1)
	classHeader, keyHeader := headerValue(r, s.cfg.ClassHeader), headerValue(r, s.cfg.SampleKeyHeader)
	in := *r.URL
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer hold.done()
		class <- s.classifyAndMirror(api, &in, classHeader, keyHeader, body)
	}()
	return class
}

// classifyAndMirror decides the request's production class and, when it is
// sampled, its class on the arms and sends it to them.
func (s *Server) classifyAndMirror(api sse.API, in *url.URL, classHeader, keyHeader string, body []byte) classified {
	prompt, err := classify.ParsePrompt(body)
	if err != nil {
		s.skip(exporter.SkipInvalidBody)
		return classified{}
	}
	// The body's hold covers a prompt of up to promptGrowth times the body
	// (invalid UTF-8 triples when decoded); a longer one, which the parser
	// has already allocated, takes the rest or is not used.
	if extra := int64(len(prompt.Text) - promptGrowth*len(body)); extra > 0 {
		if !s.budget.Take(extra) {
			s.skip(exporter.SkipOverBudget)
			return classified{}
		}
		defer s.budget.Give(extra)
	}
	prodClass, _ := s.prodIndex.Classify(prompt.Text)
	c := classified{class: classify.ClassFor(classHeader, s.allowedClass, prodClass)}
	switch {
	case len(s.arms) == 0:
	case !s.sampler.Sampled(keyHeader, prompt):
		c.mirror = record.MirrorNotSampled
	case !s.takeSlots():
		c.mirror = record.Skipped(exporter.SkipOverloaded)
	default:
		bodies, hold, skip := s.shadowBodies(api, body)
		if hold == nil {
			s.releaseSlots()
			c.mirror = record.Skipped(skip)
			break
		}
		mirrorClass, _ := s.mirrorIndex.Classify(prompt.Text)
		s.startMirror(api, in, classify.ClassFor(classHeader, s.allowedClass, mirrorClass), bodies, hold)
		c.mirror = record.MirrorMirrored
	}
	return c
}

func headerValue(r *http.Request, name string) string {
	if name == "" {
		return ""
	}
	return r.Header.Get(name)
}

// readBody reads a mirrorable body of at most MirrorMaxBodyBytes whole,
// holding heldPerBodyByte times its size in the budget (the body, then its
// prompt), and
// returns the hold, which has two owners: the production request and its
// classification. When it cannot (skip names why, or is empty for a failed
// read), hold is nil and r.Body is replaced by a reader that yields every
// byte again, followed by the rest or the error.
func (s *Server) readBody(r *http.Request) (body []byte, hold *held, skip string) {
	limit := s.cfg.MirrorMaxBodyBytes
	if r.ContentLength > limit {
		return nil, nil, exporter.SkipBodyTooLarge
	}
	var taken int64
	if r.ContentLength >= 0 {
		// One allocation, one larger than the body, to see its end.
		if !s.budget.Take(heldPerBodyByte * (r.ContentLength + 1)) {
			return nil, nil, exporter.SkipOverBudget
		}
		taken = heldPerBodyByte * (r.ContentLength + 1)
		body = make([]byte, 0, r.ContentLength+1)
	}
	replay := func(err error) {
		r.Body = replayBody{Reader: io.MultiReader(bytes.NewReader(body), readerOrError(r.Body, err)), Closer: r.Body}
		s.budget.Give(taken)
	}
	for {
		if len(body) == cap(body) {
			grow := min(max(int64(cap(body)), 32<<10), limit+1-int64(cap(body)))
			if !s.budget.Take(heldPerBodyByte * grow) {
				replay(nil)
				return nil, nil, exporter.SkipOverBudget
			}
			taken += heldPerBodyByte * grow
			body = append(make([]byte, 0, int64(cap(body))+grow), body...)
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if int64(len(body)) > limit {
			replay(err)
			return nil, nil, exporter.SkipBodyTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			replay(err)
			return nil, nil, ""
		}
	}
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, s.budget.hold(taken, 2), ""
}

// A body read for classification is held with its prompt, whose canonical
// text can be up to promptGrowth times as long as the body: invalid UTF-8
// becomes three-byte replacement characters, and a number such as 1e9 is
// written out in full.
const (
	promptGrowth    = 3
	heldPerBodyByte = 1 + promptGrowth
)

type replayBody struct {
	io.Reader
	io.Closer
}

func readerOrError(rest io.Reader, err error) io.Reader {
	if err != nil && err != io.EOF {
		return errReader{err}
	}
	return rest
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// clientBody is a client's request body as tandem and production read it.
// Each read waits at most timeout for the next bytes (nginx's
// client_body_timeout), and the first failed read is kept, so that
// production's failure to get the body is answered as the client's fault.
type clientBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	failed  atomic.Pointer[error]
}

func (b *clientBody) Read(p []byte) (int, error) {
	rc := b.rc
	rc.SetReadDeadline(time.Now().Add(b.timeout))
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		// Once the body has ended, Go's server reads ahead on the
		// connection to notice a client that goes away: no deadline then.
		rc.SetReadDeadline(time.Time{})
		if err != io.EOF {
			b.failed.CompareAndSwap(nil, &err)
		}
	}
	return n, err
}

// bodyFailure returns the error that ended the client's body early, if any.
func bodyFailure(r *http.Request) error {
	if st := stateOf(r); st != nil && st.body != nil {
		if err := st.body.failed.Load(); err != nil {
			return *err
		}
	}
	return nil
}

// clientError answers a request whose body could not be read: 408 when it
// stalled, else 400. Production's part in it is none.
func (s *Server) clientError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadRequest
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		status = http.StatusRequestTimeout
	}
	s.log.Debug("client request body failed", "path", r.URL.Path, "err", err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"tandem_client_error"}}`+"\n",
		"tandem: the request body could not be read: "+http.StatusText(status))
	// Go's server would wait, with no deadline, for up to 256 KiB more of
	// the body before closing: the answer is out, so stop reading now.
	rc := http.NewResponseController(w)
	rc.Flush()
	rc.SetReadDeadline(time.Now())
}

func hasContentEncoding(h http.Header) bool {
	ce := h.Get("Content-Encoding")
	return ce != "" && ce != "identity"
}

func (s *Server) skip(reason string) {
	if len(s.arms) > 0 || reason == exporter.SkipOverBudget {
		s.metrics.MirrorSkipped(reason)
	}
}

// productionError answers a failed production round trip. A client whose
// request body failed gets a 4xx; a client that went away, or half-closed,
// gets its connection closed (never an empty 200); otherwise a 502 that says
// what failed.
func (s *Server) productionError(w http.ResponseWriter, r *http.Request, err error) {
	if bodyErr := bodyFailure(r); bodyErr != nil {
		s.clientError(w, r, bodyErr)
		return
	}
	if r.Context().Err() != nil {
		panic(http.ErrAbortHandler)
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

// observe exports one measurement and writes its record; mirror is the
// record's Mirror (production's only).
func (s *Server) observe(config, class, pairID, mirror string, start time.Time, o exporter.Observation) {
	s.metrics.ObserveRequest(config, class, o)
	if s.records != nil || s.observeHook != nil {
		rec := record.New(start, config, class, pairID, o)
		rec.Mirror = mirror
		if s.records != nil {
			s.records.Write(rec)
		}
		if s.observeHook != nil {
			s.observeHook(rec)
		}
	}
}

// bufferPool recycles the copy buffers of the reverse proxy. A buffer is
// held for the whole life of a stream, and stream frames are far smaller
// than a buffer, so buffers are 4 KiB (one memory page: nginx's default
// proxy_buffer_size on x86-64) rather than ReverseProxy's default 32 KiB.
// A read holds at most what arrived since the last one, one frame or a few
// when tokens stream.
type bufferPool struct{}

const copyBufferBytes = 4 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferBytes); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
