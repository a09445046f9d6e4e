package sse

import "bytes"

// MaxDocumentBytes bounds the prefix of a non-streaming body a Meter keeps
// for reading its usage. Beyond it the Meter only tracks whether the
// document ends.
const MaxDocumentBytes = 8 << 20

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
