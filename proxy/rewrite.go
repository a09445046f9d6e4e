package proxy

import (
	"encoding/json"
	"errors"
	"iter"
	"strconv"

	"github.com/kestrelops/tandem/proxy/sse"
)

// rewriteBody returns the body sent to an arm: stream on, usage requested
// (chat and completions), model replaced when set. Other members pass as
// they are, in their order, and the members it sets follow them, so that it
// allocates little more than the new body. Of stream_options, when it is an
// object, the members other than include_usage pass too.
func rewriteBody(api sse.API, body []byte, model string) ([]byte, error) {
	start := skipSpace(body, 0)
	if !json.Valid(body) || body[start] != '{' {
		return nil, errors.New("request body is not a JSON object")
	}
	var quotedModel []byte
	if model != "" {
		var err error
		if quotedModel, err = json.Marshal(model); err != nil {
			return nil, err
		}
	}
	usage := api == sse.APIChatCompletions || api == sse.APICompletions
	out := make([]byte, 0, len(body)+len(`,"stream":true,"stream_options":{"include_usage":true},"model":`)+len(quotedModel))
	out = append(out, '{')
	var options []byte // the last stream_options
	for key, value := range members(body[start:]) {
		switch {
		case keyIs(key, "stream"):
		case usage && keyIs(key, "stream_options"):
			options = value
		case model != "" && keyIs(key, "model"):
		default:
			out = append(appendKey(out, key), value...)
		}
	}
	out = append(appendKey(out, `"stream"`), "true"...)
	if usage {
		out = append(appendKey(out, `"stream_options"`), '{')
		if len(options) > 0 && options[0] == '{' {
			for key, value := range members(options) {
				if !keyIs(key, "include_usage") {
					out = append(appendKey(out, key), value...)
				}
			}
		}
		out = append(appendKey(out, `"include_usage"`), "true}"...)
	}
	if quotedModel != nil {
		out = append(appendKey(out, `"model"`), quotedModel...)
	}
	return append(out, '}'), nil
}

// appendKey appends a member's key, still quoted, and its colon, after a
// comma unless the key is the object's first.
func appendKey[Key []byte | string](out []byte, key Key) []byte {
	if out[len(out)-1] != '{' {
		out = append(out, ',')
	}
	return append(append(out, key...), ':')
}

// members yields the key (still quoted) and the value of each member of the
// valid JSON object o.
func members(o []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		for i := skipSpace(o, 1); o[i] != '}'; {
			keyEnd := stringEnd(o, i)
			start := skipSpace(o, skipSpace(o, keyEnd)+1)
			end := valueEnd(o, start)
			if !yield(o[i:keyEnd], o[start:end]) {
				return
			}
			if i = skipSpace(o, end); o[i] == ',' {
				i = skipSpace(o, i+1)
			}
		}
	}
}

// valueEnd returns the index just past the valid JSON value at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		for depth := 0; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !endsValue(b[i]) { // a number or a literal
		i++
	}
	return i
}

func endsValue(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// stringEnd returns the index just past the valid JSON string at b[i].
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// keyIs reports whether the JSON string key decodes to name, which holds
// only lower case letters and underscores: characters that a key holds as
// they are or escaped as \uXXXX.
func keyIs(key []byte, name string) bool {
	in := key[1 : len(key)-1]
	for k := range len(name) {
		c, size := rune(-1), 1
		switch {
		case len(in) == 0:
			return false
		case in[0] != '\\':
			c = rune(in[0])
		case len(in) >= 6 && in[1] == 'u':
			if u, err := strconv.ParseUint(string(in[2:6]), 16, 16); err == nil {
				c, size = rune(u), 6
			}
		}
		if c != rune(name[k]) {
			return false
		}
		in = in[size:]
	}
	return len(in) == 0
}
