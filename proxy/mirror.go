package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/sse"
)

// takeSlots takes one in-flight slot on every arm and reports true, or takes
// none, counts the request as overloaded and reports false: when an arm is
// full neither gets the request, so A and B always see the same trace.
func (s *Server) takeSlots() bool {
	for i, arm := range s.arms {
		select {
		case arm.slots <- struct{}{}:
		default:
			for _, taken := range s.arms[:i] {
				<-taken.slots
			}
			s.metrics.MirrorSkipped(exporter.SkipOverloaded)
			return false
		}
	}
	return true
}

func (s *Server) releaseSlots() {
	for _, arm := range s.arms {
		<-arm.slots
	}
}

// shadowBodies rewrites body for each arm (arms sharing a model share the
// bytes) and holds them in the budget. When it cannot, it counts the
// request as skipped and returns a nil hold and the reason.
func (s *Server) shadowBodies(api sse.API, body []byte) (_ [][]byte, _ *held, skip string) {
	// Take a bound of what the rewritten bodies will hold before writing
	// them: the body with stream options and the arm's model added.
	models := map[string]bool{}
	var bound int64
	for _, arm := range s.arms {
		if !models[arm.model] {
			models[arm.model] = true
			bound += int64(len(body)+6*len(arm.model)) + rewriteOverhead // \u00XX escapes at most
		}
	}
	if !s.budget.Take(bound) {
		s.skip(exporter.SkipOverBudget)
		return nil, nil, exporter.SkipOverBudget
	}
	bodies := make([][]byte, len(s.arms))
	byModel := map[string][]byte{}
	var size int64
	for i, arm := range s.arms {
		b, ok := byModel[arm.model]
		if !ok {
			var err error
			if b, err = rewriteBody(api, body, arm.model); err != nil {
				// The body parsed as a prompt, so this cannot happen short of a bug.
				s.log.Error("building mirrored request", "config", arm.config, "err", err)
				s.budget.Give(bound)
				s.skip(exporter.SkipInvalidBody)
				return nil, nil, exporter.SkipInvalidBody
			}
			byModel[arm.model] = b
			size += int64(len(b))
		}
		bodies[i] = b
	}
	if size > bound && !s.budget.Take(size-bound) { // cannot happen short of a bug
		s.budget.Give(bound)
		s.skip(exporter.SkipOverBudget)
		return nil, nil, exporter.SkipOverBudget
	}
	s.budget.Give(bound - min(size, bound))
	return bodies, s.budget.hold(size, 1), ""
}

// rewriteOverhead bounds what rewriteBody adds to a body besides the model:
// "stream":true and "stream_options":{"include_usage":true} with separators.
const rewriteOverhead = 128

// startMirror sends the request to the arms, whose slots the caller took.
// The shadows run in their own goroutines; the caller never waits for them.
func (s *Server) startMirror(api sse.API, in *url.URL, class string, bodies [][]byte, hold *held) {
	for _, arm := range s.arms {
		s.metrics.ShadowInFlight(arm.config).Inc()
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer hold.done()
		s.mirror(api, in, class, bodies)
	}()
}

// shadowResult is one arm's measurement of a mirrored request.
type shadowResult struct {
	start time.Time
	obs   exporter.Observation
	// failure says why the arm did not complete, for tandem's log.
	failure string
}

// mirror sends the request to every arm at the same moment, in an order
// drawn anew for each pair (whichever goes first reaches a shared queue
// first), and measures each. Each arm is recorded, and gives back its
// in-flight slot, when it finishes; the pair is recorded when both have.
func (s *Server) mirror(api sse.API, in *url.URL, class string, bodies [][]byte) {
	ctx, cancel := context.WithTimeout(s.shadowCtx, s.cfg.ShadowTimeout)
	defer cancel()
	release := func(arm *upstream) {
		s.metrics.ShadowInFlight(arm.config).Dec()
		<-arm.slots
	}

	reqs := make([]*http.Request, len(s.arms))
	for i, arm := range s.arms {
		var err error
		if reqs[i], err = arm.shadowRequest(ctx, in, bodies[i]); err != nil {
			s.log.Error("building mirrored request", "config", arm.config, "err", err)
			for _, arm := range s.arms {
				release(arm)
			}
			return
		}
	}

	pairID := fmt.Sprintf("%016x", rand.Uint64())
	results := make([]shadowResult, len(s.arms))
	gate := make(chan struct{})
	done := make(chan struct{}, len(s.arms))
	for _, i := range rand.Perm(len(s.arms)) {
		arm := s.arms[i]
		go func() {
			defer func() { done <- struct{}{} }()
			<-gate
			res := s.measureShadow(arm, api, reqs[i])
			s.observe(arm.config, class, pairID, "", res.start, res.obs)
			if res.obs.Outcome != exporter.OutcomeCompleted {
				s.armFailures[arm.config].note(res.failure, time.Now())
			}
			release(arm)
			results[i] = res
		}()
	}
	close(gate)
	for range s.arms {
		<-done
	}
	s.metrics.ObservePair(class, results[0].obs, results[1].obs)
}

// shadowRequest builds the request one arm receives: body (rewritten for the
// arm by rewriteBody), and only the content type and the arm's own
// credentials as headers.
func (u *upstream) shadowRequest(ctx context.Context, in *url.URL, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.URL = &url.URL{Path: in.Path, RawPath: in.RawPath, RawQuery: shadowQuery(in.Query())}
	(&httputil.ProxyRequest{Out: req}).SetURL(u.url)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", "tandem")
	if u.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+string(u.apiKey))
	}
	return req, nil
}

// shadowQueryParams are the query parameters an arm receives; others, such
// as a client's key=..., never leave production's request.
var shadowQueryParams = []string{"api-version"}

func shadowQuery(in url.Values) string {
	out := url.Values{}
	for _, name := range shadowQueryParams {
		if v, ok := in[name]; ok {
			out[name] = v
		}
	}
	return out.Encode()
}

// measureShadow sends req to arm and reads the whole response, measuring
// it; the response is discarded. It reads at most ShadowMaxResponseBytes,
// and only while the arms together stay within ShadowReadRate: a shadow
// beyond either is cut and counted as truncated.
func (s *Server) measureShadow(arm *upstream, api sse.API, req *http.Request) shadowResult {
	var res shadowResult
	m := newMeasurement(api, s.budget, func(start time.Time, o exporter.Observation) {
		res.start, res.obs = start, o
	})
	resp, err := m.handOff(arm.transport, req)
	if err != nil {
		res.failure = failureOfError(req.Context(), err)
		return res
	}
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		res.failure = fmt.Sprintf("HTTP %d", resp.StatusCode)
	case hasContentEncoding(resp.Header):
		res.failure = "compressed response (not measured)"
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	var total int64
	for {
		n, err := resp.Body.Read(*buf)
		total += int64(n)
		if n > 0 && (total > s.cfg.ShadowMaxResponseBytes || !s.shadowRate.take(n)) {
			m.done(exporter.OutcomeTruncated, time.Now())
			res.failure = "truncated: over TANDEM_SHADOW_MAX_RESPONSE_BYTES or TANDEM_SHADOW_READ_RATE"
			break
		}
		if err != nil {
			if err != io.EOF && res.failure == "" {
				res.failure = failureOfError(req.Context(), err)
			}
			break
		}
	}
	resp.Body.Close()
	// An arm that compressed its response anyway was not measured; the
	// pair still needs its outcome.
	m.done(exporter.OutcomeError, time.Now())
	if res.failure == "" {
		res.failure = res.obs.Outcome
		if res.obs.Outcome == exporter.OutcomeError {
			res.failure = "error reported in the response body"
		}
	}
	return res
}
