package sse

import (
	"bytes"
	"encoding/json"

	"github.com/kestrelops/tandem/proxy/internal/jsonlex"
)

// reader reads one JSON document in a single pass, checking as it goes that
// the document is what encoding/json.Valid accepts. The meter descends into
// the few values it needs and skips the rest; values are handed out as
// sub-slices of the input, so reading a frame costs no allocation. After the
// first error every method returns at once, and done reports false.
type reader struct {
	b     []byte
	i     int
	depth int // containers open around b[i]
	bad   bool
}

// peek returns the first byte of the next token, or 0 at the end of input.
func (r *reader) peek() byte {
	r.i = jsonlex.SkipSpace(r.b, r.i)
	if r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// value reads the next value whole and returns it raw.
func (r *reader) value() []byte {
	if r.bad {
		return nil
	}
	start := jsonlex.SkipSpace(r.b, r.i)
	end := validValueEnd(r.b, start, r.depth)
	if end < 0 {
		r.bad = true
		return nil
	}
	r.i = end
	return r.b[start:end]
}

// object reads the next value. When it is an object, member is called with
// each key (unescaped) and the reader before the member's value: member
// either reads the value with one reader call and returns true, or returns
// false to have it skipped. Any other value is skipped.
func (r *reader) object(member func(key []byte) bool) {
	if !r.open('{', '}') {
		return
	}
	for !r.bad {
		if r.peek() != '"' {
			r.bad = true
			return
		}
		end, escaped := jsonlex.ScanString(r.b, r.i)
		if end < 0 {
			r.bad = true
			return
		}
		key := r.b[r.i+1 : end-1]
		if escaped {
			key = []byte(unquote(r.b[r.i:end]))
		}
		r.i = end
		if r.peek() != ':' {
			r.bad = true
			return
		}
		r.i++
		if !member(key) {
			r.value()
		}
		if !r.next('}') {
			return
		}
	}
}

// array reads the next value. When it is an array, element is called before
// each element, which it either reads with one reader call and returns true,
// or returns false to have it skipped. Any other value is skipped.
func (r *reader) array(element func() bool) {
	if !r.open('[', ']') {
		return
	}
	for !r.bad {
		if !element() {
			r.value()
		}
		if !r.next(']') {
			return
		}
	}
}

// open enters the container that opens with opening and reports whether it
// has members to read. An empty container is read whole; a value of
// another kind is skipped.
func (r *reader) open(opening, closing byte) bool {
	if r.bad {
		return false
	}
	if r.peek() != opening {
		r.value()
		return false
	}
	if r.depth == maxNestingDepth {
		r.bad = true
		return false
	}
	r.i++
	if r.peek() == closing {
		r.i++
		return false
	}
	r.depth++
	return true
}

// next moves past the comma before the next member or element and reports
// true, or past the container's closing byte and reports false.
func (r *reader) next(closing byte) bool {
	if r.bad {
		return false
	}
	switch r.peek() {
	case ',':
		r.i++
		return true
	case closing:
		r.i++
		r.depth--
		return false
	}
	r.bad = true
	return false
}

// done reports whether the input was one valid value and the reader has
// read it to its end.
func (r *reader) done() bool {
	return !r.bad && r.depth == 0 && r.i > 0 && jsonlex.SkipSpace(r.b, r.i) == len(r.b)
}

func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

// nonEmptyString reports whether v is a string of at least one character.
func nonEmptyString(v []byte) bool { return len(v) > 2 && v[0] == '"' }

// nonEmptyArray reports whether v is an array with at least one element.
func nonEmptyArray(v []byte) bool {
	return len(v) >= 2 && v[0] == '[' && jsonlex.SkipSpace(v, 1) < len(v)-1
}

// stringIs reports whether the string v equals s without allocating. Escaped
// strings are unquoted first.
func stringIs(v []byte, s string) bool {
	if !isString(v) {
		return false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == s
	}
	return unquote(v) == s
}

// unquote decodes the JSON string v; it returns "" for anything else.
func unquote(v []byte) string {
	if !isString(v) {
		return ""
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner)
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}
