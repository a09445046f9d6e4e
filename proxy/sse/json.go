package sse

import (
	"bytes"
	"encoding/json"
)

// The helpers below walk a JSON document that validJSON has accepted,
// without decoding it: they hand out sub-slices of the input, so reading a
// frame costs no allocation. On invalid input they stop early but never
// panic.

func skipSpace(b []byte, i int) int {
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

// stringEnd returns the index just past the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		i += q
		backslashes := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			backslashes++
		}
		i++
		if backslashes%2 == 0 {
			return i
		}
	}
	return len(b)
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// eachMember calls fn with the key and raw value of every member of the
// object obj. Keys are unescaped; values are raw JSON.
func eachMember(obj []byte, fn func(key, value []byte)) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := stringEnd(obj, i)
		if end-i < 2 {
			return
		}
		key := obj[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(unquote(obj[i:end]))
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		if i >= len(obj) {
			return
		}
		end = valueEnd(obj, i)
		fn(key, obj[i:end])
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// eachElement calls fn with every raw element of the array arr.
func eachElement(arr []byte, fn func(value []byte)) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		end := valueEnd(arr, i)
		fn(arr[i:end])
		i = skipSpace(arr, end)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

func isObject(v []byte) bool { return len(v) >= 2 && v[0] == '{' }

// nonEmptyString reports whether v is a string of at least one character.
func nonEmptyString(v []byte) bool { return len(v) > 2 && v[0] == '"' }

// nonEmptyArray reports whether v is an array with at least one element.
func nonEmptyArray(v []byte) bool {
	return len(v) >= 2 && v[0] == '[' && skipSpace(v, 1) < len(v)-1
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

// count parses v as a non-negative integer token count.
func count(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
