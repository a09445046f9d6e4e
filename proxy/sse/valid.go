package sse

import "encoding/binary"

// maxNestingDepth is encoding/json's limit on nested objects and arrays.
const maxNestingDepth = 10000

// validJSON reports whether b is exactly one JSON value, optionally
// surrounded by whitespace. It accepts what encoding/json.Valid accepts
// (including its nesting limit and invalid UTF-8 inside strings).
func validJSON(b []byte) bool {
	end := validValueEnd(b, skipSpace(b, 0), 0)
	return end >= 0 && skipSpace(b, end) == len(b)
}

// validValueEnd returns the index just past the valid JSON value that starts
// at b[i], or -1 when none does. depth containers are already open around
// it, counted against the nesting limit. It reads b once and does not
// allocate for up to 32 levels of nesting.
func validValueEnd(b []byte, i, depth int) int {
	var buf [32]byte
	open := buf[:0] // '{' or '[' of every container not yet closed
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '{', '[':
			if depth+len(open) == maxNestingDepth {
				return -1
			}
			open = append(open, b[i])
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == closing(open[len(open)-1]) {
				open = open[:len(open)-1]
				i++
				break
			}
			if open[len(open)-1] == '{' {
				if i = memberValue(b, i); i < 0 {
					return -1
				}
			}
			continue
		case '"':
			i = validStringEnd(b, i)
		case 't':
			i = literalEnd(b, i, "true")
		case 'f':
			i = literalEnd(b, i, "false")
		case 'n':
			i = literalEnd(b, i, "null")
		default:
			i = numberEnd(b, i)
		}
		if i < 0 {
			return -1
		}
		// After a value: close containers, or go on to the next element.
		for {
			if len(open) == 0 {
				return i
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			top := open[len(open)-1]
			if b[i] == closing(top) {
				open = open[:len(open)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return -1
			}
			i++
			if top == '{' {
				if i = memberValue(b, skipSpace(b, i)); i < 0 {
					return -1
				}
			}
			break
		}
	}
}

// closing is the byte that closes a container opened by opening.
func closing(opening byte) byte {
	if opening == '{' {
		return '}'
	}
	return ']'
}

// memberValue checks a member's name and colon starting at b[i] and returns
// the index just past the colon, or -1.
func memberValue(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validStringEnd(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
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

// plainEnd returns the index of the first byte from b[i] on that a JSON
// string does not hold as it is, or len(b).
func plainEnd(b []byte, i int) int {
	for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	for i < len(b) && plainStringByte[b[i]] {
		i++
	}
	return i
}

// validStringEnd returns the index just past the string starting at
// b[i] == '"', or -1 when it is not a valid JSON string.
func validStringEnd(b []byte, i int) int {
	end, _ := scanString(b, i)
	return end
}

// scanString is validStringEnd that also reports whether the string holds
// an escape sequence.
func scanString(b []byte, i int) (end int, escaped bool) {
	for i++; ; i++ {
		if i = plainEnd(b, i); i >= len(b) {
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

// literalEnd returns the index just past lit at b[i], or -1.
func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the index just past the number starting at b[i], or -1.
func numberEnd(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
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
		j := digitsEnd(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
