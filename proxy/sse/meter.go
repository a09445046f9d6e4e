package sse

import (
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// Meter measures one response body as the proxy forwards it. It holds, for
// a stream, its Parser's buffers (see MaxLineBytes); for a non-streaming
// body, about 2.6 KiB whatever the body's length. It is not safe for
// concurrent use: call Write from the goroutine that reads the body, and
// Ended and Observation after it, or from that same goroutine.
type Meter struct {
	api       API
	start     time.Time
	streaming bool

	parser Parser
	emit   func(Event)
	at     time.Time // arrival of the chunk being parsed

	doc     *document // a non-streaming body, from its first Write
	settled bool      // res is up to date with doc

	res result
}

// MaxFinishReasonBytes bounds the finish reason a Meter reports (a chat
// finish_reason, a Responses status or incomplete reason). A longer one,
// which no server sends, is reported as FinishReasonOther rather than cut.
const MaxFinishReasonBytes = 64

// FinishReasonOther stands for a finish reason longer than
// MaxFinishReasonBytes.
const FinishReasonOther = "other"

// maxQuotedFinishReason is the longest JSON string that can unquote to
// MaxFinishReasonBytes: six bytes (\uXXXX) for each byte, and two quotes.
const maxQuotedFinishReason = 6*MaxFinishReasonBytes + 2

// finishReason unquotes the JSON string v as a finish reason, bounded by
// MaxFinishReasonBytes; it returns "" when v is not a string.
func finishReason(v []byte) string {
	switch {
	case !isString(v):
		return ""
	case len(v) > maxQuotedFinishReason:
		return FinishReasonOther
	}
	s := unquote(v)
	if len(s) > MaxFinishReasonBytes {
		return FinishReasonOther
	}
	return s
}

// result is what a Meter has read from the body so far.
type result struct {
	frames         int  // output frames
	firstToken     bool // an output frame arrived in a stream
	first, last    time.Time
	outputTokens   int
	outputReported bool // outputTokens came from the server's usage
	promptTokens   int
	cachedTokens   int
	finish         string
	ended          bool
	failed         bool
}

// NewMeter returns a Meter for a response of api to a request handed to the
// upstream at start. It expects a text/event-stream body until told
// otherwise by SetStreaming.
func NewMeter(api API, start time.Time) *Meter {
	m := &Meter{api: api, start: start, streaming: true}
	m.emit = m.event
	return m
}

// SetBudget makes the meter take the buffers of partial frames from b; see
// Parser.SetBudget. Call Release when the body is done.
func (m *Meter) SetBudget(b Budget) { m.parser.SetBudget(b) }

// Release gives back what the meter took from its budget.
func (m *Meter) Release() { m.parser.Release() }

// Dropped reports whether a frame was dropped unread (too long, or no
// budget for it): the observation then misses what that frame said.
func (m *Meter) Dropped() bool { return m.parser.Dropped() }

// SetStreaming tells the meter whether the body is text/event-stream (true)
// or a single JSON document (false). Call it before the first Write.
func (m *Meter) SetStreaming(streaming bool) { m.streaming = streaming }

// Write observes the next chunk of the body, which arrived at at. Frames the
// chunk completes are stamped with at: a frame's time is the arrival of its
// last byte. Write never fails and never retains p; frames it cannot parse
// are skipped.
func (m *Meter) Write(at time.Time, p []byte) {
	if m.streaming {
		m.at = at
		m.parser.Feed(p, m.emit)
		return
	}
	m.writeDocument(p)
}

// Ended reports whether the body carried its proper end: the "data: [DONE]"
// event of a chat or completions stream; a response.completed,
// response.incomplete or response.failed event of a Responses stream; a
// complete JSON document for a non-streaming body.
func (m *Meter) Ended() bool {
	m.settle()
	return m.res.ended
}

// Failed reports whether the body carried an error from the server: in a
// chat or completions frame or document, a non-null "error" object or
// "object":"error" (vLLM and SGLang send such a frame, then [DONE], when
// generation fails mid-stream); a response.failed or error event of a
// Responses stream.
func (m *Meter) Failed() bool {
	m.settle()
	return m.res.failed
}

// Observation returns the measurement so far, timings relative to start.
// The caller fills Outcome and Duration. A non-streaming body has no first
// token. Implausible usage (see plausibleUsage) is reported as absent, with
// ImplausibleUsage set.
func (m *Meter) Observation() exporter.Observation {
	m.settle()
	r := &m.res
	o := exporter.Observation{FinishReason: r.finish}
	if r.plausibleUsage() {
		o.PromptTokens, o.CachedPromptTokens = r.promptTokens, r.cachedTokens
	} else {
		o.ImplausibleUsage = true
	}
	if r.outputReported && !o.ImplausibleUsage {
		o.OutputTokens = r.outputTokens
	} else {
		o.OutputTokens, o.TokensEstimated = r.frames, true
	}
	if r.firstToken {
		o.FirstToken = true
		o.TTFT = r.first.Sub(m.start)
		o.LastToken = r.last.Sub(m.start)
	}
	return o
}

func (m *Meter) event(ev Event) {
	if m.api == APIResponses {
		m.responsesEvent(ev)
		return
	}
	m.chatEvent(ev)
}

func (m *Meter) outputFrame() {
	m.res.frames++
	if !m.res.firstToken {
		m.res.firstToken, m.res.first = true, m.at
	}
	m.res.last = m.at
}

// chatChunk is what a chat or completions chunk, or a whole non-streaming
