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

// startMirror sends the request to the arms, whose slots the caller took.
// The shadows run in their own goroutine; the caller never waits for them.
func (s *Server) startMirror(api sse.API, in *url.URL, class string, body []byte) {
	for _, arm := range s.arms {
		s.metrics.ShadowInFlight(arm.config).Inc()
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer func() {
			for _, arm := range s.arms {
				s.metrics.ShadowInFlight(arm.config).Dec()
				<-arm.slots
			}
		}()
		s.mirror(api, in, class, body)
	}()
}

// shadowResult is one arm's measurement of a mirrored request.
type shadowResult struct {
	start time.Time
	obs   exporter.Observation
}

// mirror sends the request to every arm at the same moment, measures each,
// and records the pair.
func (s *Server) mirror(api sse.API, in *url.URL, class string, body []byte) {
	ctx, cancel := context.WithTimeout(s.shadowCtx, s.cfg.ShadowTimeout)
	defer cancel()

	reqs := make([]*http.Request, len(s.arms))
	bodies := map[string][]byte{} // by model: arms sharing a model share the body
	for i, arm := range s.arms {
		var err error
		shadowBody, ok := bodies[arm.model]
		if !ok {
			shadowBody, err = rewriteBody(api, body, arm.model)
			bodies[arm.model] = shadowBody
		}
		if err == nil {
			reqs[i], err = arm.shadowRequest(ctx, in, shadowBody)
		}
		if err != nil {
			// The body parsed as a prompt, so this cannot happen short of a bug.
			s.log.Error("building mirrored request", "config", arm.config, "err", err)
			return
		}
	}

	results := make([]shadowResult, len(s.arms))
	gate := make(chan struct{})
	done := make(chan struct{}, len(s.arms))
	for i, arm := range s.arms {
		go func() {
			defer func() { done <- struct{}{} }()
			<-gate
			results[i] = arm.measureShadow(api, reqs[i])
		}()
	}
	close(gate)
	for range s.arms {
		<-done
	}

	pairID := fmt.Sprintf("%016x", rand.Uint64())
	for i, arm := range s.arms {
		s.observe(arm.config, class, pairID, results[i].start, results[i].obs)
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

// measureShadow sends req and reads the whole response, measuring it; the
// response is discarded.
func (u *upstream) measureShadow(api sse.API, req *http.Request) shadowResult {
	var res shadowResult
	m := newMeasurement(api, func(start time.Time, o exporter.Observation) {
		res.start, res.obs = start, o
	})
	resp, err := m.handOff(u.transport, req)
	if err != nil {
		return res
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxShadowResponseBytes))
	resp.Body.Close()
	// An arm that compressed its response anyway was not measured; the
	// pair still needs its outcome.
	m.done(exporter.OutcomeError, time.Now())
	return res
}

// maxShadowResponseBytes bounds what tandem reads of one shadow response; a
// longer one is cut and counted as canceled.
const maxShadowResponseBytes = 64 << 20
