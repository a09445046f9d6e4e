package classify

import (
	"bytes"
	"iter"
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/kestrelops/tandem/proxy/internal/jsonlex"
)

// This file reads JSON in place, as encoding/json reads it into values of
// type any: validation, then strings, keys and numbers decoded and written
// the way json.Unmarshal and json.Marshal would. Only the validator checks
// its input; the other functions take JSON it has accepted.

// maxDepth is encoding/json's limit on nested objects and arrays.
const maxDepth = 10000

// validator checks JSON as json.Unmarshal does before it decodes anything.
// It holds one bit per nesting level, so that skipping a deeply nested value
// costs neither recursion nor allocation.
type validator struct {
	objects [maxDepth/64 + 1]uint64 // bit d: the container at depth d is an object
}

func (v *validator) setObject(depth int, object bool) {
	word, bit := depth/64, uint64(1)<<(depth%64)
	if object {
		v.objects[word] |= bit
	} else {
		v.objects[word] &^= bit
	}
}

func (v *validator) isObject(depth int) bool {
	return v.objects[depth/64]&(1<<(depth%64)) != 0
}

// valueEnd returns the index just past the JSON value that starts at b[i],
// or -1 when there is no valid one. depth containers are already open around
// it. With numbers set, a number that does not fit a float64 is invalid too,
// as it is to json.Unmarshal into an any.
func (v *validator) valueEnd(b []byte, i, depth int, numbers bool) int {
	outer := depth
	for {
		i = jsonlex.SkipSpace(b, i)
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return -1
			}
			v.setObject(depth, c == '{')
			depth++
			i = jsonlex.SkipSpace(b, i+1)
			if i < len(b) && b[i] == jsonlex.Closing(c) {
				depth--
				i++
				break
			}
			if c == '{' {
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
			end := jsonlex.NumberEnd(b, i)
			if end > 0 && numbers && !fitsFloat64(b[i:end]) {
				return -1
			}
			i = end
		}
		if i < 0 {
			return -1
		}
		// After a value: close containers, or go on to the next element.
		for {
			if depth == outer {
				return i
			}
			i = jsonlex.SkipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			object := v.isObject(depth - 1)
			if object && b[i] == '}' || !object && b[i] == ']' {
				depth--
				i++
				continue
			}
			if b[i] != ',' {
				return -1
			}
			i++
			if object {
				if i = jsonlex.MemberValue(b, jsonlex.SkipSpace(b, i)); i < 0 {
					return -1
				}
			}
			break
		}
	}
}

// hex4 decodes four hex digits, or returns -1.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// skip returns the index just past the valid JSON value at b[i].
func skip(b []byte, i int) int {
	switch b[i] {
	case '"':
		return jsonlex.StringEnd(b, i)
	case 't', 'n':
		return i + len("true")
	case 'f':
		return i + len("false")
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = jsonlex.StringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	return jsonlex.NumberEnd(b, i)
}

// elements yields the elements of the valid JSON array a.
func elements(a []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for i := jsonlex.SkipSpace(a, 1); a[i] != ']'; {
			end := skip(a, i)
			if !yield(a[i:end]) {
				return
			}
			if i = jsonlex.SkipSpace(a, end); a[i] == ',' {
				i = jsonlex.SkipSpace(a, i+1)
			}
		}
	}
}

// members yields the key (a JSON string) and the value of each member of
// the valid JSON object o.
func members(o []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		for i := jsonlex.SkipSpace(o, 1); o[i] != '}'; {
			keyEnd := jsonlex.StringEnd(o, i)
			start := jsonlex.SkipSpace(o, jsonlex.SkipSpace(o, keyEnd)+1)
			end := skip(o, start)
			if !yield(o[i:keyEnd], o[start:end]) {
				return
			}
			if i = jsonlex.SkipSpace(o, end); o[i] == ',' {
				i = jsonlex.SkipSpace(o, i+1)
			}
		}
	}
}

// isString reports whether the JSON value v is a string.
func isString(v []byte) bool { return len(v) > 0 && v[0] == '"' }

// isNumber reports whether the JSON value v is a number.
func isNumber(v []byte) bool { return len(v) > 0 && (v[0] == '-' || '0' <= v[0] && v[0] <= '9') }

func isNull(v []byte) bool { return len(v) > 0 && v[0] == 'n' }

// nextRune decodes the rune at in[i] of a string's inside (between the
// quotes) as json.Unmarshal does: escapes resolved, a surrogate pair joined,
// a lone surrogate and each byte of invalid UTF-8 read as U+FFFD.
func nextRune(in []byte, i int) (r rune, next int) {
	c := in[i]
	if c >= utf8.RuneSelf {
		r, size := utf8.DecodeRune(in[i:])
		return r, i + size
	}
	if c != '\\' {
		return rune(c), i + 1
	}
	switch c = in[i+1]; c {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r = hex4(in[i+2 : i+6])
		if !utf16.IsSurrogate(r) {
			return r, i + 6
		}
		if i+12 <= len(in) && in[i+6] == '\\' && in[i+7] == 'u' {
			if pair := utf16.DecodeRune(r, hex4(in[i+8:i+12])); pair != unicode.ReplacementChar {
				return pair, i + 12
			}
		}
		return unicode.ReplacementChar, i + 6
	}
	return rune(c), i + 2
}

// appendText appends the decoded JSON string s.
func appendText(dst, s []byte) []byte {
	in := s[1 : len(s)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return append(dst, in...)
	}
	for i := 0; i < len(in); {
		var r rune
		r, i = nextRune(in, i)
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// htmlSafe marks the ASCII bytes json.Marshal writes as they are.
var htmlSafe = func() (safe [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		safe[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return safe
}()

const hexDigits = "0123456789abcdef"

// appendQuoted appends the JSON string s as json.Marshal writes the string
// json.Unmarshal decodes from it: quotes, backslashes and control characters
// escaped, and <, >, &, U+2028 and U+2029 too.
func appendQuoted(dst, s []byte) []byte {
	in := s[1 : len(s)-1]
	dst = append(dst, '"')
	for i := 0; i < len(in); {
		start := i
		for i < len(in) && in[i] < utf8.RuneSelf && htmlSafe[in[i]] {
			i++
		}
		dst = append(dst, in[start:i]...)
		if i == len(in) {
			break
		}
		var r rune
		r, i = nextRune(in, i)
		switch {
		case r < utf8.RuneSelf && htmlSafe[r]:
			dst = append(dst, byte(r))
		case r == '\\' || r == '"':
			dst = append(dst, '\\', byte(r))
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r < utf8.RuneSelf:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}

// stringIs reports whether the JSON value v is a string that decodes to s.
func stringIs(v []byte, s string) bool {
	if !isString(v) {
		return false
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return string(in) == s
	}
	i := 0
	for k := 0; k < len(s); {
		if i == len(in) {
			return false
		}
		var r rune
		r, i = nextRune(in, i)
		want, size := utf8.DecodeRuneInString(s[k:])
		if r != want {
			return false
		}
		k += size
	}
	return i == len(in)
}

// foldsTo reports whether the JSON string key names the field name (in
// lower case letters) for json.Unmarshal: a key equal to name under simple
// Unicode case folding, as bytes.EqualFold compares.
func foldsTo(key []byte, name string) bool {
	in := key[1 : len(key)-1]
	i := 0
	for k := 0; k < len(name); k++ {
		if i == len(in) {
			return false
		}
		var r rune
		r, i = nextRune(in, i)
		if !sameLetter(r, rune(name[k])) {
			return false
		}
	}
	return i == len(in)
}

// sameLetter reports whether r is the lower case ASCII letter c or one in
// its case folding orbit (as the Kelvin sign is of k).
func sameLetter(r, c rune) bool {
	if r == c || r == c-'a'+'A' {
		return true
	}
	if r < utf8.RuneSelf {
		return false
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == c {
			return true
		}
	}
	return false
}

// compareKeys orders the JSON strings a and b as strings.Compare orders
// their decoded values.
func compareKeys(a, b []byte) int {
	a, b = a[1:len(a)-1], b[1:len(b)-1]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if ca < utf8.RuneSelf && ca != '\\' && cb < utf8.RuneSelf && cb != '\\' {
			if ca != cb {
				return int(ca) - int(cb)
			}
			i++
			j++
			continue
		}
		var ra, rb rune
		ra, i = nextRune(a, i)
		rb, j = nextRune(b, j)
		if ra != rb {
			return int(ra - rb)
		}
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

// fitsFloat64 reports whether the JSON number n is within the range of a
// float64, as json.Unmarshal into an any requires.
func fitsFloat64(n []byte) bool {
	if len(n) <= 308 && bytes.IndexByte(n, 'e') < 0 && bytes.IndexByte(n, 'E') < 0 {
		return true // below 1e308
	}
	_, err := strconv.ParseFloat(transient(n), 64)
	return err == nil
}

// appendNumber appends the JSON number n (one that fits a float64) as
// json.Marshal writes the float64 json.Unmarshal decodes from it.
func appendNumber(dst, n []byte) []byte {
	if digits := bytes.TrimPrefix(n, []byte("-")); len(digits) <= 15 && jsonlex.DigitsEnd(digits, 0) == len(digits) {
		return append(dst, n...) // an integer a float64 holds exactly
	}
	f, _ := strconv.ParseFloat(transient(n), 64)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if end := len(dst); format == 'e' && end-start >= 4 && string(dst[end-4:end-1]) == "e-0" {
		dst[end-2] = dst[end-1] // 1e-07 is written 1e-7
		dst = dst[:end-1]
	}
	return dst
}

// transient views b as a string for a call that keeps no reference to it
// (ParseFloat's errors hold a copy, and are dropped anyway), so that a long
// number is parsed without being copied.
func transient(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
