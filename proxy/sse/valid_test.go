package sse

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{,}`, `[1,]`, `[,1]`, `[1 2]`, `{"a":1 "b":2}`,
	`{"a":[1,{"b":null}],"c":"d"}`, `[[[]]]`, `[[[]]`, `[]]`, `{]`, `[}`, `{"a"}`, `{1:2}`, `"x"`, `"x`, `"\"`,
	`"\u00e9\n\t\/\\\b\f\r"`, `"\u00g0"`, `"\u00e"`, `"\x"`, "\"a\x01b\"", "\"\xff\xfe\"", `true`, `tru`, `truex`,
	`false`, `null`, `nul`, `NaN`, `0`, `-0`, `01`, `-`, `-a`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-05`, `1e`,
	`1e+`, `-12.34e-56`, `1 2`, `[1] x`, "\ufeff{}", "{}\n", "\t[\r\n1\t]", `{"a":{"b":{"c":[true,false,null]}}}`,
	`data: {}`, `[DONE]`, `{"choices":[{"delta":{"content":"hi"}}]}`, `{"choices":[{"delta":{"content":"hi"}}]`,
}

func TestValidJSON(t *testing.T) {
	cases := append([]string{
		strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth),
		strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1),
		strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40),
	}, validCases...)
	for _, c := range cases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.60q) = %v, encoding/json.Valid says %v", c, got, want)
		}
	}
}

// TestReaderValidates checks that the reader, walking objects and arrays
// member by member, accepts exactly what encoding/json.Valid accepts,
// nesting limit included.
func TestReaderValidates(t *testing.T) {
	cases := append([]string{
		strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth),
		strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1),
		`{"a":` + strings.Repeat("[", maxNestingDepth-1) + strings.Repeat("]", maxNestingDepth-1) + `}`,
		`{"a":` + strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth) + `}`,
		`{"a":{"b":` + strings.Repeat("[", maxNestingDepth-2) + strings.Repeat("]", maxNestingDepth-2) + `}}`,
		`{"a":{"b":` + strings.Repeat("[", maxNestingDepth-1) + strings.Repeat("]", maxNestingDepth-1) + `}}`,
	}, validCases...)
	for _, c := range cases {
		want := json.Valid([]byte(c))
		r := reader{b: []byte(c)}
		var walk func(key []byte) bool
		walk = func([]byte) bool {
			if r.peek() == '{' {
				r.object(walk)
				return true
			}
			return false
		}
		r.object(walk)
		if r.done() != want {
			t.Errorf("reader walking %.60q: done %v, encoding/json.Valid says %v", c, r.done(), want)
		}
	}
}

func TestValidJSONAllocs(t *testing.T) {
	frame := []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}],"usage":{"a":[1,2,{"b":[]}]}}`)
	if n := testing.AllocsPerRun(100, func() { validJSON(frame) }); n != 0 {
		t.Errorf("validJSON allocates %v times per frame, want 0", n)
	}
}

// FuzzValidJSON checks that validJSON agrees with encoding/json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	for _, frame := range chatStream(2) {
		f.Add(frame[len("data: "):])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json.Valid says %v", b, got, want)
		}
	})
}
