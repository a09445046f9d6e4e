package sse

import (
	"bytes"
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
	if validJSON(ev.Data) && m.readChoices(ev.Data) {
		m.outputFrame()
	}
}

func (m *Meter) outputFrame() {
	m.res.frames++
	if !m.res.firstToken {
		m.res.firstToken, m.res.first = true, m.at
	}
	m.res.last = m.at
}

// readChoices reads a chat or completions chunk, or a whole non-streaming
// response, and reports whether it carries output.
func (m *Meter) readChoices(doc []byte) bool {
	output := false
	eachMember(doc, func(key, value []byte) {
		switch string(key) {
		case "choices":
			eachElement(value, func(choice []byte) {
				if m.readChoice(choice) {
					output = true
				}
			})
		case "usage":
			m.readUsage(value, chatUsage)
		case "error":
			if isObject(value) {
				m.res.failed = true
			}
		case "object":
			if stringIs(value, "error") {
				m.res.failed = true
			}
		}
	})
	return output
}

func (m *Meter) readChoice(choice []byte) bool {
	output := false
	eachMember(choice, func(key, value []byte) {
		switch string(key) {
		case "delta", "message":
			if hasOutput(value) {
				output = true
			}
		case "text":
			if nonEmptyString(value) {
				output = true
			}
		case "finish_reason":
			if isString(value) {
				m.res.finish = unquote(value)
			}
		}
	})
	return output
}

// hasOutput reports whether a chat delta or message carries content,
// reasoning or a tool call.
func hasOutput(delta []byte) bool {
	output := false
	eachMember(delta, func(key, value []byte) {
		switch string(key) {
		case "content", "reasoning_content", "reasoning":
			if nonEmptyString(value) {
				output = true
			}
		case "tool_calls":
			if nonEmptyArray(value) {
				output = true
			}
		}
	})
	return output
}

type usageKeys struct{ output, prompt, promptDetails string }

var (
	chatUsage      = usageKeys{"completion_tokens", "prompt_tokens", "prompt_tokens_details"}
	responsesUsage = usageKeys{"output_tokens", "input_tokens", "input_tokens_details"}
)

func (m *Meter) readUsage(usage []byte, keys usageKeys) {
	eachMember(usage, func(key, value []byte) {
		n, isCount := count(value)
		switch string(key) {
		case keys.output:
			if isCount {
				m.res.outputTokens, m.res.outputReported = n, true
			}
		case keys.prompt:
			if isCount {
				m.res.promptTokens = n
			}
		case keys.promptDetails:
			eachMember(value, func(key, value []byte) {
				if n, ok := count(value); ok && string(key) == "cached_tokens" {
					m.res.cachedTokens = n
				}
			})
		}
	})
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
	if !validJSON(ev.Data) {
		return
	}
	var typ, delta, response []byte
	eachMember(ev.Data, func(key, value []byte) {
		switch string(key) {
		case "type":
			typ = value
		case "delta":
			delta = value
		case "response":
			response = value
		}
	})
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

// readResponse reads a Responses API response object: its usage, and as
// finish reason its status, or the reason it is incomplete. It reports
// whether the response has output items.
func (m *Meter) readResponse(response []byte) bool {
	var status, reason string
	output := false
	eachMember(response, func(key, value []byte) {
		switch string(key) {
		case "status":
			status = unquote(value)
		case "incomplete_details":
			eachMember(value, func(key, value []byte) {
				if string(key) == "reason" {
					reason = unquote(value)
				}
			})
		case "usage":
			m.readUsage(value, responsesUsage)
		case "output":
			output = nonEmptyArray(value)
		case "error":
			if isObject(value) {
				m.res.failed = true
			}
		}
	})
	switch {
	case reason != "":
		m.res.finish = reason
	case status != "":
		m.res.finish = status
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
	if !validJSON(m.doc) {
		return
	}
	m.res.ended = true
	var output bool
	if m.api == APIResponses {
		output = m.readResponse(m.doc)
	} else {
		output = m.readChoices(m.doc)
	}
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
