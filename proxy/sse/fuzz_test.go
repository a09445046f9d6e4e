package sse

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"
	"unicode/utf8"
)

const maxFuzzInput = 64 << 10

// referenceEvents parses a whole stream by the WHATWG rules in the plainest
// way, as the oracle for Parser.
func referenceEvents(stream []byte) []event {
	stream = bytes.TrimPrefix(stream, bom)
	var lines [][]byte
	for len(stream) > 0 {
		i := bytes.IndexAny(stream, "\r\n")
		if i < 0 {
			break
		}
		lines = append(lines, stream[:i])
		if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
			i++
		}
		stream = stream[i+1:]
	}
	var events []event
	var name string
	var data []string
	for _, line := range lines {
		switch {
		case len(line) == 0:
			if data != nil {
				events = append(events, event{name, string(bytes.Join(toBytes(data), []byte("\n")))})
			}
			name, data = "", nil
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				name = string(value)
			case "data":
				data = append(data, string(value))
			}
		}
	}
	return events
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func FuzzParser(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream []byte) {
		if len(stream) > maxFuzzInput {
			return
		}
		want := referenceEvents(stream)
		if got := collect(stream); !slices.Equal(got, want) {
			t.Fatalf("in one piece: got %q, want %q", got, want)
		}
		var bytewise [][]byte
		for i := range stream {
			bytewise = append(bytewise, stream[i:i+1])
		}
		if got := collect(bytewise...); !slices.Equal(got, want) {
			t.Fatalf("byte by byte: got %q, want %q", got, want)
		}
		third := len(stream) / 3
		if got := collect(stream[:third], stream[third:2*third], stream[2*third:]); !slices.Equal(got, want) {
			t.Fatalf("in thirds: got %q, want %q", got, want)
		}
	})
}

func FuzzMeter(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte, api uint8, streaming bool) {
		if len(body) > maxFuzzInput {
			return
		}
		a := API(1 + api%3)
		whole := NewMeter(a, start)
		whole.SetStreaming(streaming)
		whole.Write(start, body)
		bytewise := NewMeter(a, start)
		bytewise.SetStreaming(streaming)
		for i := range body {
			bytewise.Write(start, body[i:i+1])
		}
		if w, b := whole.Observation(), bytewise.Observation(); w != b || whole.Ended() != bytewise.Ended() || whole.Failed() != bytewise.Failed() {
			t.Fatalf("in one piece: %+v, ended %v, failed %v; byte by byte: %+v, ended %v, failed %v",
				w, whole.Ended(), whole.Failed(), b, bytewise.Ended(), bytewise.Failed())
		}

		m := NewMeter(a, start)
		m.SetStreaming(streaming)
		for i := range body {
			m.Write(start.Add(time.Duration(i+1)*time.Millisecond), body[i:i+1])
		}
		o := m.Observation()
		switch {
		case o.FirstToken && (o.TTFT <= 0 || o.LastToken < o.TTFT):
			t.Fatalf("timings out of order: %+v", o)
		case !o.FirstToken && (o.TTFT != 0 || o.LastToken != 0):
			t.Fatalf("timings without a first token: %+v", o)
		case !streaming && o.FirstToken:
			t.Fatalf("first token in a non-streaming body: %+v", o)
		case o.OutputTokens < 0 || o.PromptTokens < 0 || o.CachedPromptTokens < 0:
			t.Fatalf("negative token count: %+v", o)
		case o.TokensEstimated && o.FirstToken && o.OutputTokens == 0:
			t.Fatalf("output frame not counted: %+v", o)
		case o.OutputTokens > maxPlausibleTokens && !o.TokensEstimated || o.PromptTokens > maxPlausibleTokens || o.CachedPromptTokens > o.PromptTokens:
			t.Fatalf("implausible usage reported: %+v", o)
		case len(o.FinishReason) > MaxFinishReasonBytes:
			t.Fatalf("finish reason of %d bytes", len(o.FinishReason))
		}
	})
}

// FuzzJSONWalk checks the single-pass JSON reader against encoding/json:
// it accepts what json.Valid accepts whether it reads values whole or walks
// objects and arrays, and hands out the members and elements encoding/json
// finds.
func FuzzJSONWalk(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	for _, frame := range chatStream(2) {
		f.Add(frame[len("data: "):])
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > maxFuzzInput {
			return
		}
		valid := json.Valid(doc)
		whole := reader{b: doc}
		whole.value()
		if whole.done() != valid {
			t.Fatalf("reading %q whole: done %v, json.Valid %v", doc, whole.done(), valid)
		}
		members := map[string]string{}
		walk := reader{b: doc}
		walk.object(func(key []byte) bool {
			members[string(key)] = string(walk.value())
			return true
		})
		if walk.done() != valid {
			t.Fatalf("walking %q as an object: done %v, json.Valid %v", doc, walk.done(), valid)
		}
		var elements []string
		walk = reader{b: doc}
		walk.array(func() bool {
			if len(elements)%2 == 0 {
				elements = append(elements, string(walk.value()))
				return true
			}
			elements = append(elements, "skipped")
			return false
		})
		if walk.done() != valid {
			t.Fatalf("walking %q as an array: done %v, json.Valid %v", doc, walk.done(), valid)
		}
		if !valid || !utf8.Valid(doc) {
			return
		}
		var object map[string]json.RawMessage
		if json.Unmarshal(doc, &object) == nil && object != nil {
			if len(members) != len(object) {
				t.Fatalf("reader found %d distinct keys, encoding/json %d", len(members), len(object))
			}
			for k, v := range object {
				if members[k] != string(v) {
					t.Fatalf("key %q: reader %q, encoding/json %q", k, members[k], v)
				}
			}
		}
		var array []json.RawMessage
		if json.Unmarshal(doc, &array) == nil && array != nil {
			if len(elements) != len(array) {
				t.Fatalf("reader found %d elements, encoding/json %d", len(elements), len(array))
			}
			for i := range array {
				if i%2 == 0 && elements[i] != string(array[i]) {
					t.Fatalf("element %d: reader %q, encoding/json %q", i, elements[i], array[i])
				}
			}
		}
		var s string
		if v := bytes.TrimSpace(doc); isString(v) && json.Unmarshal(doc, &s) == nil {
			if unquote(v) != s || !stringIs(v, s) || nonEmptyString(v) != (s != "") {
				t.Fatalf("string %s: unquote %q, want %q", v, unquote(v), s)
			}
		}
		var n uint64
		if json.Unmarshal(doc, &n) == nil {
			c, ok := count(bytes.TrimSpace(doc))
			if ok && (n <= maxPlausibleTokens && c != int(n) || n > maxPlausibleTokens && c <= maxPlausibleTokens) {
				t.Fatalf("count(%s) = %d, want %d", doc, c, n)
			}
		}
	})
}
