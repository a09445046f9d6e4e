package sse

// maxNestingDepth is encoding/json's limit on nested objects and arrays.
const maxNestingDepth = 10000

// validJSON reports whether b is exactly one JSON value, optionally
// surrounded by whitespace. It accepts what encoding/json.Valid accepts
// (including its nesting limit and invalid UTF-8 inside strings) in one
// pass over b without allocating for up to 32 levels of nesting.
func validJSON(b []byte) bool {
	var buf [32]byte
	open := buf[:0] // '{' or '[' of every container not yet closed
	i := 0
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '{', '[':
			if len(open) == maxNestingDepth {
				return false
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
					return false
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
			return false
		}
		// After a value: close containers, or go on to the next element.
		for {
			i = skipSpace(b, i)
			if len(open) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := open[len(open)-1]
			if b[i] == closing(top) {
				open = open[:len(open)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return false
			}
			i++
			if top == '{' {
				if i = memberValue(b, skipSpace(b, i)); i < 0 {
					return false
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

// validStringEnd returns the index just past the string starting at
// b[i] == '"', or -1 when it is not a valid JSON string.
func validStringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		case c < 0x20:
			return -1
		}
	}
	return -1
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
