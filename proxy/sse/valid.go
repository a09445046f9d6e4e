package sse

import "github.com/kestrelops/tandem/proxy/internal/jsonlex"

// maxNestingDepth is encoding/json's limit on nested objects and arrays.
const maxNestingDepth = 10000

// validJSON reports whether b is exactly one JSON value, optionally
// surrounded by whitespace. It accepts what encoding/json.Valid accepts
// (including its nesting limit and invalid UTF-8 inside strings).
func validJSON(b []byte) bool {
	end := validValueEnd(b, jsonlex.SkipSpace(b, 0), 0)
	return end >= 0 && jsonlex.SkipSpace(b, end) == len(b)
}

// validValueEnd returns the index just past the valid JSON value that starts
// at b[i], or -1 when none does. depth containers are already open around
// it, counted against the nesting limit. It reads b once and does not
// allocate for up to 32 levels of nesting.
func validValueEnd(b []byte, i, depth int) int {
	var buf [32]byte
	open := buf[:0] // '{' or '[' of every container not yet closed
	for {
		i = jsonlex.SkipSpace(b, i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '{', '[':
			if depth+len(open) == maxNestingDepth {
				return -1
			}
			open = append(open, b[i])
			i = jsonlex.SkipSpace(b, i+1)
			if i < len(b) && b[i] == jsonlex.Closing(open[len(open)-1]) {
				open = open[:len(open)-1]
				i++
				break
			}
			if open[len(open)-1] == '{' {
				if i = jsonlex.MemberValue(b, i); i < 0 {
					return -1
				}
			}
			continue
		case '"':
			i = jsonlex.StringEnd(b, i)
		case 't':
			i = jsonlex.LiteralEnd(b, i, "true")
		case 'f':
			i = jsonlex.LiteralEnd(b, i, "false")
		case 'n':
			i = jsonlex.LiteralEnd(b, i, "null")
		default:
			i = jsonlex.NumberEnd(b, i)
		}
		if i < 0 {
			return -1
		}
		// After a value: close containers, or go on to the next element.
		for {
			if len(open) == 0 {
				return i
			}
			i = jsonlex.SkipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			top := open[len(open)-1]
			if b[i] == jsonlex.Closing(top) {
				open = open[:len(open)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return -1
			}
			i++
			if top == '{' {
				if i = jsonlex.MemberValue(b, jsonlex.SkipSpace(b, i)); i < 0 {
					return -1
				}
			}
			break
		}
	}
}
