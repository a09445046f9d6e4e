package sse

import (
	"bytes"
	"mime"
)

// MaxLineBytes bounds each buffer of a Parser: the line whose end it has not
// seen, the current event's data (its data lines, each with an LF) and the
// current event's name. A line longer than this is dropped, and so is an
// event whose data would be. A Parser thus holds at most three times
// MaxLineBytes, and a copy of the last dispatched event name.
const MaxLineBytes = 1 << 20

// minBufferBytes is the smallest buffer a Parser allocates: room for a
// typical frame, so that frames a little longer than the first do not each
// grow it.
const minBufferBytes = 512

// retainBytes is the largest buffer a Parser keeps for reuse once the line or
// event that grew it is done.
const retainBytes = 64 << 10

// Event is one dispatched server-sent event.
type Event struct {
	// Name is the value of the event's last "event:" field, or empty when
	// it had none (the WHATWG default type "message" is left to the caller).
	Name string
	// Data is the event's data lines joined by "\n". It is valid only
	// during the callback that receives it.
	Data []byte
}

// Parser splits a text/event-stream body into events, fed in chunks split
// anywhere. It follows the WHATWG event-stream interpretation rules: lines
// end in LF, CRLF or CR; a leading byte order mark is ignored; lines starting
// with ":" are comments; "data:" lines are joined by "\n"; "event:" names
// the event; "id:", "retry:" and unknown fields are ignored; a blank line
// dispatches the event unless it has no data. An event left unterminated at
// the end of the body is never dispatched.
//
// The zero Parser is ready to use. A Parser is not safe for concurrent use.
type Parser struct {
	line     []byte // the incomplete line carried over from the last Feed
	overlong bool   // the current line exceeded MaxLineBytes and is dropped
	afterCR  bool   // the last byte seen was a CR, so an LF next is part of it
	started  bool   // the first line has been read (BOM handling)

	data         []byte // data lines of the current event, each followed by LF
	dataOverflow bool   // the current event's data exceeded MaxLineBytes
	name         []byte
	lastName     string // the last dispatched name, reused to avoid allocation

	budget  Budget // nil: unbounded but for MaxLineBytes
	charged int64  // bytes taken from budget for the buffers held now
	dropped bool   // a line or event was dropped: too long, or no budget for it
}

// Budget is shared memory a Parser takes its buffers from, beyond the first
// minBufferBytes of each. Take reports whether n bytes fit; it never waits.
type Budget interface {
	Take(n int64) bool
	Give(n int64)
}

// SetBudget makes p take its buffers from b. Call it before the first Feed,
// and Release when done with p.
func (p *Parser) SetBudget(b Budget) { p.budget = b }

// Release gives back what p took from its budget; p drops every line that
// needs more room from then on.
func (p *Parser) Release() {
	if p.budget != nil && p.charged > 0 {
		p.budget.Give(p.charged)
	}
	p.charged = 0
	p.line, p.data, p.name = nil, nil, nil
	p.budget = refusing{}
}

// Dropped reports whether a line or event was dropped unread: longer than
// MaxLineBytes, or the budget had no room for it.
func (p *Parser) Dropped() bool { return p.dropped }

type refusing struct{}

func (refusing) Take(int64) bool { return false }
func (refusing) Give(int64)      {}

// chargeable is what a buffer of capacity c takes from a budget.
func chargeable(c int) int64 { return int64(max(c-minBufferBytes, 0)) }

// Feed parses the next chunk of the stream, calling emit for every event the
// chunk completes. It never retains b.
func (p *Parser) Feed(b []byte, emit func(Event)) {
	for len(b) > 0 {
		if p.afterCR {
			p.afterCR = false
			if b[0] == '\n' {
				b = b[1:]
				continue
			}
		}
		end := lineEnd(b)
		if end < 0 {
			p.carry(b)
			return
		}
		line := b[:end]
		p.afterCR = b[end] == '\r'
		b = b[end+1:]
		if len(p.line) > 0 || p.overlong || len(line) > MaxLineBytes {
			p.carry(line)
			line = p.line
		}
		if !p.overlong {
			p.processLine(line, emit)
		}
		p.started = true
		p.overlong = false
		p.line = p.reuse(p.line)
	}
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	search := b
	if lf >= 0 {
		search = b[:lf]
	}
	if cr := bytes.IndexByte(search, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// carry appends part of an unfinished line to the line buffer.
func (p *Parser) carry(b []byte) {
	if p.overlong {
		return
	}
	line, ok := p.grow(p.line, len(b))
	if !ok {
		p.overlong, p.dropped = true, true
		p.line = p.reuse(p.line)
		return
	}
	p.line = append(line, b...)
}

// grow returns buf with room for n more bytes, or false when that would take
// it past MaxLineBytes. Every growth of the Parser's buffers goes through it.
func (p *Parser) grow(buf []byte, n int) ([]byte, bool) {
	need := len(buf) + n
	switch {
	case need > MaxLineBytes:
		return buf, false
	case need <= cap(buf):
		return buf, true
	}
	size := min(max(need, 2*cap(buf), minBufferBytes), MaxLineBytes)
	if p.budget != nil {
		more := chargeable(size) - chargeable(cap(buf))
		if more > 0 && !p.budget.Take(more) {
			return buf, false
		}
		p.charged += more
	}
	grown := make([]byte, len(buf), size)
	copy(grown, buf)
	return grown, true
}

// reuse empties buf, keeping its storage unless it has grown large. Every
// release of the Parser's buffers goes through it.
func (p *Parser) reuse(buf []byte) []byte {
	if cap(buf) > retainBytes {
		if n := chargeable(cap(buf)); p.budget != nil && n > 0 {
			p.budget.Give(n)
			p.charged -= n
		}
		return nil
	}
	return buf[:0]
}

var bom = []byte("\uFEFF")

func (p *Parser) processLine(line []byte, emit func(Event)) {
	if !p.started {
		line = bytes.TrimPrefix(line, bom)
	}
	if len(line) == 0 {
		p.dispatch(emit)
		return
	}
	if line[0] == ':' {
		return
	}
	field, value := line, []byte(nil)
	if colon := bytes.IndexByte(line, ':'); colon >= 0 {
		field, value = line[:colon], line[colon+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		p.name = p.name[:0]
		if name, ok := p.grow(p.name, len(value)); ok {
			p.name = append(name, value...)
		}
	case "data":
		if p.dataOverflow {
			return
		}
		data, ok := p.grow(p.data, len(value)+1)
		if !ok {
			p.dataOverflow, p.dropped = true, true
			p.data = p.reuse(p.data)
			return
		}
		data = append(data, value...)
		p.data = append(data, '\n')
	}
}

func (p *Parser) dispatch(emit func(Event)) {
	if len(p.data) > 0 && !p.dataOverflow {
		if string(p.name) != p.lastName {
			p.lastName = string(p.name)
		}
		emit(Event{Name: p.lastName, Data: p.data[:len(p.data)-1]})
	}
	p.data = p.reuse(p.data)
	p.dataOverflow = false
	p.name = p.reuse(p.name)
}

// IsEventStream reports whether a Content-Type header value names
// text/event-stream.
func IsEventStream(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "text/event-stream"
}
