// Package jsonlex is the lexical grammar of JSON as encoding/json checks it:
// where a run of white space, a string, a number or a literal that starts at
// b[i] ends. The meter (proxy/sse) and the classifier (proxy/classify) read
// untrusted documents in place with it, allocating nothing. Invalid UTF-8 is
// valid inside strings, as it is to encoding/json.
package jsonlex

import "encoding/binary"

// SkipSpace returns the index of the first byte from b[i] on that is not
// JSON white space, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Closing is the byte that closes a container opened by opening ('{' or '[').
func Closing(opening byte) byte {
	return opening + 2 // ']' follows '[' by two, as '}' follows '{'
}

// MemberValue checks a member's name and colon starting at b[i] and returns
// the index just past the colon, or -1.
func MemberValue(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = StringEnd(b, i); i < 0 {
		return -1
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return i + 1
}

// plainStringByte marks the bytes a JSON string holds as they are: all but
// the quote, the backslash and control characters.
var plainStringByte = func() (plain [256]bool) {
	for c := 0x20; c < len(plain); c++ {
		plain[c] = c != '"' && c != '\\'
	}
	return plain
}()

// plainWord reports whether none of the eight bytes in w is a quote, a
// backslash or a control character (the bit tricks of "Bit Twiddling Hacks":
// a byte is zero, or below n, where its top bit survives the subtraction).
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^('"'*ones), w^('\\'*ones)
	below := (w-0x20*ones)&^w | (quote-ones)&^quote | (backslash-ones)&^backslash
	return below&highs == 0
}

// PlainEnd returns the index of the first byte from b[i] on that a JSON
// string does not hold as it is (a quote, a backslash or a control
// character), or len(b). It reads eight bytes at a time.
func PlainEnd(b []byte, i int) int {
	for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	for i < len(b) && plainStringByte[b[i]] {
		i++
	}
	return i
}

// StringEnd returns the index just past the string starting at b[i] == '"',
// or -1 when it is not a valid JSON string.
func StringEnd(b []byte, i int) int {
	end, _ := ScanString(b, i)
	return end
}

// ScanString is StringEnd that also reports whether the string holds an
// escape sequence.
func ScanString(b []byte, i int) (end int, escaped bool) {
	for i++; ; i++ {
		if i = PlainEnd(b, i); i >= len(b) {
			return -1, escaped
		}
		switch b[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			escaped = true
			i++
			if i >= len(b) {
				return -1, escaped
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1, escaped
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return -1, escaped
					}
				}
				i += 4
			default:
				return -1, escaped
			}
		default: // a control character
			return -1, escaped
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// LiteralEnd returns the index just past lit at b[i], or -1.
func LiteralEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// NumberEnd returns the index just past the number starting at b[i], or -1.
func NumberEnd(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = DigitsEnd(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := DigitsEnd(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := DigitsEnd(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// DigitsEnd returns the index of the first byte from b[i] on that is not an
// ASCII digit, or len(b).
func DigitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
