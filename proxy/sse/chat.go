package sse

import "bytes"

var done = []byte("[DONE]")

// chatEvent reads one chat or completions stream event.
func (m *Meter) chatEvent(ev Event) {
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

// chatChunk is what a chat or completions chunk, or a whole non-streaming
// response, says.
type chatChunk struct {
	output bool   // a choice carries content, reasoning, a tool call or text
	finish []byte // the last string finish_reason, raw
	usage  usageCounts
	failed bool // the server reported an error
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
		m.res.finish = finishReason(c.finish)
	}
	m.applyUsage(c.usage)
	if c.failed {
		m.res.failed = true
	}
}
