package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/sse"
)

// This file holds the clock of every measurement, production's, A's and
// B's alike: it starts in measurement.handOff, immediately before the request
// is given to the transport (measuredTransport for production), and stops
// when meteredBody sees the response body end.

// measuredTransport hands requests that carry a measuredRequest to its
// measurement, which stamps the start of the clock at the hand-off.
type measuredTransport struct{ next http.RoundTripper }

// measuredRequest is what a measured production request carries in its
// context (requestState): its measurement and its body, read whole.
type measuredRequest struct {
	m    *measurement
	body []byte
}

func (t measuredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if st := stateOf(req); st != nil && st.measured.m != nil {
		return st.measured.m.handOff(t.next, withBodyInMemory(req, st.measured.body))
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

// measurement follows one request on one upstream. Its clock starts in
// handOff, immediately before the request is given to the transport, and
// stops when the response body ends (EOF, error or close), or at the response
// headers when the round trip fails or the status is not 2xx.
type measurement struct {
	api    sse.API
	budget sse.Budget // where the meter takes buffers for partial frames
	start  time.Time
	meter  *sse.Meter

	once   sync.Once
	finish func(start time.Time, o exporter.Observation)
}

func newMeasurement(api sse.API, budget sse.Budget, finish func(time.Time, exporter.Observation)) *measurement {
	return &measurement{api: api, budget: budget, finish: finish}
}

// handOff stamps the start of the measurement and gives req to rt. A
// compressed response is returned unmeasured: nothing is reported unless the
// caller calls done.
func (m *measurement) handOff(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	m.start = time.Now()
	m.meter = sse.NewMeter(m.api, m.start)
	m.meter.SetBudget(m.budget)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		m.done(outcomeOfError(req.Context(), err, false), time.Now())
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		m.done(exporter.OutcomeError, time.Now())
		return resp, nil
	}
	if hasContentEncoding(resp.Header) {
		// A compressed body cannot be read as it passes; it is left
		// unmeasured rather than measured wrong, and the caller decides.
		// Shadows never ask for compression.
		return resp, nil
	}
	m.meter.SetStreaming(sse.IsEventStream(resp.Header.Get("Content-Type")))
	resp.Body = &meteredBody{body: resp.Body, m: m, ctx: req.Context()}
	return resp, nil
}

// done reports the observation once; later calls are ignored.
func (m *measurement) done(outcome string, end time.Time) {
	m.once.Do(func() {
		var o exporter.Observation
		if m.meter != nil {
			o = m.meter.Observation()
			if m.meter.Dropped() && outcome == exporter.OutcomeCompleted {
				// A frame was dropped unread: what it said is unknown.
				outcome = exporter.OutcomeTruncated
			}
			m.meter.Release()
		}
		o.Outcome = outcome
		o.Duration = end.Sub(m.start)
		m.finish(m.start, o)
	})
}

// endOutcome names the outcome of a body read to its end.
func (m *measurement) endOutcome() string {
	switch {
	case m.meter.Failed():
		return exporter.OutcomeError
	case m.meter.Ended():
		return exporter.OutcomeCompleted
	}
	return exporter.OutcomeIncomplete
}

// meteredBody observes a response body as it is read: each chunk is stamped
// on arrival and handed to the meter, and passed on unchanged.
type meteredBody struct {
	body io.ReadCloser
	m    *measurement
	ctx  context.Context
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	now := time.Now()
	if n > 0 {
		b.m.meter.Write(now, p[:n])
	}
	switch {
	case err == io.EOF || err != nil && b.m.meter.Ended():
		// A body cut after its proper end ([DONE], a whole document)
		// carried everything: the client that reads to [DONE] and hangs up
		// at once cancels the read of what little follows.
		b.m.done(b.m.endOutcome(), now)
	case err != nil:
		b.m.done(outcomeOfError(b.ctx, err, true), now)
	}
	return n, err
}

// Close ends the measurement; a body closed before its end was abandoned by
// the reader (the client went away or tandem is shutting down), one closed
// after its proper end was complete.
func (b *meteredBody) Close() error {
	outcome := exporter.OutcomeCanceled
	if b.m.meter.Ended() {
		outcome = b.m.endOutcome()
	}
	b.m.done(outcome, time.Now())
	return b.body.Close()
}

// outcomeOfError names the outcome of a failed round trip or body read.
// Once the body has started (bodyStarted), any other failure is a cut stream.
func outcomeOfError(ctx context.Context, err error, bodyStarted bool) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return exporter.OutcomeTimeout
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exporter.OutcomeCanceled
	case bodyStarted:
		return exporter.OutcomeIncomplete
	}
	return exporter.OutcomeError
}
