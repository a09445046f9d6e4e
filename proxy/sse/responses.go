package sse

import (
	"bytes"
	"cmp"
)

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
	m.applyResponse(readResponse(response))
}

// responseSummary is what a Responses API response object says.
type responseSummary struct {
	status, reason []byte // the last status and incomplete_details.reason, raw
	usage          usageCounts
	output         bool // the last "output" is an array with items
	failed         bool // a non-null "error" object
}

// readResponse reads a Responses API response object, which the caller has
// checked to be valid JSON.
func readResponse(response []byte) (s responseSummary) {
	r := reader{b: response}
	r.object(func(key []byte) bool {
		switch string(key) {
		case "status":
			s.status = r.value()
		case "incomplete_details":
			r.object(func(key []byte) bool {
				if string(key) != "reason" {
					return false
				}
				s.reason = r.value()
				return true
			})
		case "usage":
			s.usage.read(&r, responsesUsage)
		case "output":
			s.output = nonEmptyArray(r.value())
		case "error":
			if r.peek() == '{' {
				s.failed = true
			}
			return false
		default:
			return false
		}
		return true
	})
	return s
}

// applyResponse takes a response's usage, and as finish reason the reason
// it is incomplete, or else its status.
func (m *Meter) applyResponse(s responseSummary) {
	if s.failed {
		m.res.failed = true
	}
	m.applyUsage(s.usage)
	if finish := cmp.Or(finishReason(s.reason), finishReason(s.status)); finish != "" {
		m.res.finish = finish
	}
}
