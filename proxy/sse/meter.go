package sse

import (
	"bytes"
	"cmp"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// MaxDocumentBytes bounds the prefix of a non-streaming body a Meter keeps
// for reading its usage. Beyond it the Meter only tracks whether the
// document ends.
const MaxDocumentBytes = 8 << 20

// Meter measures one response body as the proxy forwards it. It is not safe
// for concurrent use: call Write from the goroutine that reads the body, and
// Ended and Observation after it, or from that same goroutine.
type Meter struct {
	api       API
	start     time.Time
	streaming bool

	parser Parser
	emit   func(Event)
	at     time.Time // arrival of the chunk being parsed

	doc         []byte // non-streaming body, up to MaxDocumentBytes
	docParsed   int    // len(doc) when res was last computed from doc, or -1
	docOverflow bool   // doc exceeded MaxDocumentBytes and was released
	docEnd      docEnd // structure of an overflowed doc

	res result
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
	m := &Meter{api: api, start: start, streaming: true, docParsed: -1}
	m.emit = m.event
	return m
}

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
// token.
func (m *Meter) Observation() exporter.Observation {
	m.settle()
	r := &m.res
	o := exporter.Observation{
		OutputTokens:       r.outputTokens,
		PromptTokens:       r.promptTokens,
		CachedPromptTokens: r.cachedTokens,
		FinishReason:       r.finish,
	}
	if !r.outputReported {
		o.OutputTokens = r.frames
		o.TokensEstimated = true
	}
	if r.firstToken {
		o.FirstToken = true
		o.TTFT = r.first.Sub(m.start)
		o.LastToken = r.last.Sub(m.start)
	}
	return o
}

var done = []byte("[DONE]")

func (m *Meter) event(ev Event) {
	if m.api == APIResponses {
		m.responsesEvent(ev)
		return
	}
	if bytes.Equal(bytes.TrimSpace(ev.Data), done) {
		m.res.ended = true
		return
	}
	if c, ok := readChat(ev.Data); ok {
		m.applyChat(c)
		if c.output {
			m.outputFrame()
		}
	}
}

func (m *Meter) outputFrame() {
	m.res.frames++
	if !m.res.firstToken {
		m.res.firstToken, m.res.first = true, m.at
	}
	m.res.last = m.at
}

// chatChunk is what a chat or completions chunk, or a whole non-streaming
// response, says.
type chatChunk struct {
	output bool   // a choice carries content, reasoning, a tool call or text
	finish []byte // the last string finish_reason, raw
	usage  usageCounts
	failed bool // the server reported an error
}

type usageCounts struct {
	output, prompt, cached          int
	hasOutput, hasPrompt, hasCached bool
}

// readChat reads a chat or completions chunk or response in one pass, and
// reports whether it is valid JSON (ok); an invalid one says nothing.
func readChat(doc []byte) (c chatChunk, ok bool) {
	r := reader{b: doc}
	r.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			r.array(func() bool {
				r.object(func(key []byte) bool { return c.readChoiceMember(&r, key) })
				return true
			})
		case "usage":
			c.usage.read(&r, chatUsage)
		case "error":
			if r.peek() == '{' {
				c.failed = true
			}
			return false
		case "object":
			if stringIs(r.value(), "error") {
				c.failed = true
			}
		default:
			return false
		}
		return true
	})
	return c, r.done()
}

// readChoiceMember reads the member key of one element of "choices".
func (c *chatChunk) readChoiceMember(r *reader, key []byte) bool {
	switch string(key) {
	case "delta", "message":
		r.object(func(key []byte) bool {
			switch string(key) {
			case "content", "reasoning_content", "reasoning":
				if nonEmptyString(r.value()) {
					c.output = true
				}
			case "tool_calls":
				if nonEmptyArray(r.value()) {
					c.output = true
				}
			default:
				return false
			}
			return true
		})
	case "text":
		if nonEmptyString(r.value()) {
			c.output = true
		}
	case "finish_reason":
		if v := r.value(); isString(v) {
			c.finish = v
		}
	default:
		return false
	}
	return true
}

func (m *Meter) applyChat(c chatChunk) {
	if c.finish != nil {
		m.res.finish = unquote(c.finish)
	}
	m.applyUsage(c.usage)
	if c.failed {
		m.res.failed = true
	}
}

type usageKeys struct{ output, prompt, promptDetails string }

var (
	chatUsage      = usageKeys{"completion_tokens", "prompt_tokens", "prompt_tokens_details"}
	responsesUsage = usageKeys{"output_tokens", "input_tokens", "input_tokens_details"}
)

// read reads a usage object named by keys; counts it does not hold, or
// holds as something other than a non-negative integer, are left alone.
func (u *usageCounts) read(r *reader, keys usageKeys) {
	r.object(func(key []byte) bool {
		switch string(key) {
		case keys.output:
			if n, ok := count(r.value()); ok {
				u.output, u.hasOutput = n, true
			}
		case keys.prompt:
			if n, ok := count(r.value()); ok {
				u.prompt, u.hasPrompt = n, true
			}
		case keys.promptDetails:
			r.object(func(key []byte) bool {
				if string(key) != "cached_tokens" {
					return false
				}
				if n, ok := count(r.value()); ok {
					u.cached, u.hasCached = n, true
				}
				return true
			})
		default:
			return false
		}
		return true
	})
}

func (m *Meter) applyUsage(u usageCounts) {
	if u.hasOutput {
		m.res.outputTokens, m.res.outputReported = u.output, true
	}
	if u.hasPrompt {
		m.res.promptTokens = u.prompt
	}
	if u.hasCached {
		m.res.cachedTokens = u.cached
	}
}

type responsesKind int

const (
	responsesOther responsesKind = iota
	responsesOutput
	responsesCompleted
	responsesIncomplete
	responsesFailed
	responsesError
)

func kindOf[T string | []byte](typ T) responsesKind {
	switch string(typ) {
	case "response.output_text.delta",
		"response.reasoning_text.delta",
		"response.reasoning_summary_text.delta",
		"response.function_call_arguments.delta":
		return responsesOutput
	case "response.completed":
		return responsesCompleted
	case "response.incomplete":
		return responsesIncomplete
	case "response.failed":
		return responsesFailed
	case "error":
		return responsesError
	}
	return responsesOther
}

// responsesEvent reads one Responses API stream event. Its type is the JSON
// "type" field, or the SSE event name when the data has none.
func (m *Meter) responsesEvent(ev Event) {
	var typ, delta, response []byte
	r := reader{b: ev.Data}
	r.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			typ = r.value()
		case "delta":
			delta = r.value()
		case "response":
			response = r.value()
		default:
			return false
		}
		return true
	})
	if !r.done() {
		return
	}
	kind := kindOf(ev.Name)
	switch {
	case isString(typ) && bytes.IndexByte(typ, '\\') < 0:
		kind = kindOf(typ[1 : len(typ)-1])
	case isString(typ):
		kind = kindOf(unquote(typ))
	}
	switch kind {
	case responsesOutput:
		if nonEmptyString(delta) {
			m.outputFrame()
		}
	case responsesCompleted:
		m.endResponse(response, "completed")
	case responsesIncomplete:
		m.endResponse(response, "incomplete")
	case responsesFailed:
		m.res.failed = true
		m.endResponse(response, "failed")
	case responsesError:
		m.res.failed = true
	}
}

func (m *Meter) endResponse(response []byte, status string) {
	m.res.ended = true
	m.res.finish = status
	m.readResponse(response)
}

// readResponse reads a Responses API response object, which the caller has
// checked to be valid JSON: its usage, and as finish reason its status, or
// the reason it is incomplete. It reports whether the response has output
// items.
func (m *Meter) readResponse(response []byte) bool {
	var status, reason []byte
	var usage usageCounts
	output := false
	r := reader{b: response}
	r.object(func(key []byte) bool {
		switch string(key) {
		case "status":
			status = r.value()
		case "incomplete_details":
			r.object(func(key []byte) bool {
				if string(key) != "reason" {
					return false
				}
				reason = r.value()
				return true
			})
		case "usage":
			usage.read(&r, responsesUsage)
		case "output":
			output = nonEmptyArray(r.value())
		case "error":
			if r.peek() == '{' {
				m.res.failed = true
			}
			return false
		default:
			return false
		}
		return true
	})
	m.applyUsage(usage)
	if finish := cmp.Or(unquote(reason), unquote(status)); finish != "" {
		m.res.finish = finish
	}
	return output
}

func (m *Meter) writeDocument(p []byte) {
	if m.docOverflow {
		m.docEnd.feed(p)
		return
	}
	if len(m.doc)+len(p) <= MaxDocumentBytes {
		m.doc = append(m.doc, p...)
		return
	}
	m.docOverflow = true
	m.docEnd.feed(m.doc)
	m.docEnd.feed(p)
	m.doc = nil
}

// settle brings res up to date with a non-streaming body, parsing the
// document when it has grown since the last parse.
func (m *Meter) settle() {
	if m.streaming {
		return
	}
	if m.docOverflow {
		m.res = result{ended: m.docEnd.complete()}
		return
	}
	if m.docParsed == len(m.doc) {
		return
	}
	m.docParsed = len(m.doc)
	m.res = result{}
	var output bool
	if m.api == APIResponses {
		if !validJSON(m.doc) {
			return
		}
		output = m.readResponse(m.doc)
	} else {
		c, ok := readChat(m.doc)
		if !ok {
			return
		}
		m.applyChat(c)
		output = c.output
	}
	m.res.ended = true
	if output {
		m.res.frames = 1
	}
}

// docEnd follows the nesting of a JSON document without keeping it, to tell
// whether its top-level object or array has closed.
type docEnd struct {
	depth    int
	inString bool
	escaped  bool
	closed   bool
	invalid  bool // a byte that cannot belong to a single document
}

func (d *docEnd) feed(b []byte) {
	for len(b) > 0 && !d.invalid {
		switch {
		case d.closed:
			d.invalid = len(bytes.TrimLeft(b, " \t\r\n")) > 0
			return
		case d.escaped:
			d.escaped = false
			b = b[1:]
		case d.inString:
			quote, backslash := bytes.IndexByte(b, '"'), bytes.IndexByte(b, '\\')
			switch {
			case backslash >= 0 && (quote < 0 || backslash < quote):
				d.escaped = true
				b = b[backslash+1:]
			case quote >= 0:
				d.inString = false
				b = b[quote+1:]
			default:
				return
			}
		default:
			i := bytes.IndexAny(b, `"{}[]`)
			if i < 0 {
				return
			}
			switch b[i] {
			case '"':
				d.inString = true
			case '{', '[':
				d.depth++
			default:
				d.depth--
				d.closed = d.depth == 0
				d.invalid = d.depth < 0
			}
			b = b[i+1:]
		}
	}
}

func (d *docEnd) complete() bool { return d.closed && !d.invalid }
