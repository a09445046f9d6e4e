package sse

import (
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kestrelops/tandem/exporter"
)

// wholeDocument is how the meter read a non-streaming body before it read
// one as it passed: keep the body whole, then read it once with the reader
// of stream frames. It is the oracle document is checked against.
func wholeDocument(api API, body []byte) (o exporter.Observation, ended, failed bool) {
	m := &Meter{api: api, start: start, streaming: true} // streaming: settle leaves res alone
	var output bool
	if api == APIResponses {
		if !validJSON(body) {
			return m.Observation(), false, false
		}
		s := readResponse(body)
		m.applyResponse(s)
		output = s.output
	} else {
		c, ok := readChat(body)
		if !ok {
			return m.Observation(), false, false
		}
		m.applyChat(c)
		output = c.output
	}
	m.res.ended = true
	if output {
		m.res.frames = 1
	}
	return m.Observation(), m.Ended(), m.Failed()
}

// meterDocument meters body as a non-streaming response fed in pieces.
func meterDocument(api API, pieces ...[]byte) (o exporter.Observation, ended, failed bool) {
	m := NewMeter(api, start)
	m.SetStreaming(false)
	for _, p := range pieces {
		m.Write(start, p)
	}
	return m.Observation(), m.Ended(), m.Failed()
}

// documentCases are bodies that exercise every path the document follows.
var documentCases = []string{
	`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":8}}}`,
	`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1"}]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"message":{"content":"","tool_calls":[ ]},"finish_reason":null}]}`,
	`{"choices":[{"message":{"reasoning_content":"x"}},{"delta":{"reasoning":"y"}},{"text":""},{"text":"z","finish_reason":"length"}]}`,
	`{"choices":[{"finish_reason":"a"},{"finish_reason":null},{"finish_reason":7}]}`,
	`{"choices":[{"finish_reason":"a","finish_reason":"st\u006fp"}],"usage":{"completion_tokens":1},"usage":{"prompt_tokens":2}}`,
	`{"choices":"odd","usage":[1],"error":null,"object":"chat.completion"}`,
	`{"error":{"message":"model not found"}}`,
	`{"error":{}}`,
	`{"object":"error","message":"boom"}`,
	`{"object":"\u0065rror"}`,
	`{"\u0063hoices":[{"m\u0065ssage":{"c\u006fntent":"a"}}],"us\u0061ge":{"completion_t\u006fkens":4}}`,
	`{"ch\u00f6ices":[{"message":{"content":"a"}}]}`,
	`{"usage":{"completion_tokens":1e3,"prompt_tokens":-1,"prompt_tokens_details":{"cached_tokens":1.5}}}`,
	`{"usage":{"completion_tokens":0,"prompt_tokens":10000001,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"usage":{"completion_tokens":999999999999999999999999999999,"prompt_tokens":3}}`,
	`{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`,
	`{"choices":[{"message":{"content":"a"}}],"usage":{"completion_tokens":"5"}}`,
	` {"choices" : [ { "message" : { "content" : "a\"b\\c\/\b\f\n\r\t\u1234" } , "finish_reason" : "stop" } ] } ` + "\n",
	`{"choices":[{"finish_reason":"` + strings.Repeat("x", 400) + `"}]}`,
	`{"choices":[{"finish_reason":"` + strings.Repeat(`\u00e9`, 32) + `"}]}`,
	`{"choices":[[{"message":{"content":"nested too deep"}}]],"a":{"choices":[{"message":{"content":"not top level"}}]}}`,
	`{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message"}],"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":5}}`,
	`{"object":"response","status":"failed","error":{"code":"server_error"},"output":[]}`,
	`{"status":"completed","status":null,"output":[1],"output":{},"incomplete_details":{"reason":"x"},"incomplete_details":{"reason":null}}`,
	`{"status":{"a":"b"},"incomplete_details":[],"output":"x"}`,
	`[{"choices":[{"message":{"content":"a"}}]}]`,
	`"just a string"`, `12`, `-0.5e+7`, `0`, `true`, `null`, ``, ` `,
	`{"choices":[{"message":{"content":"a"}}]`,
	`{"choices":[{"message":{"content":"a"}}]}}`,
	`{"choices":[{"message":{"content":"a"}}]} x`,
	`{"choices":[{"message":{"content":"a\x"}}]}`,
	"{\"choices\":[{\"message\":{\"content\":\"a\x01\"}}]}",
	"{\"choices\":[{\"message\":{\"content\":\"\xff\xfe\"}}],\"\xff\":1}",
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":truex}`, `{"a":1 2}`,
	`{"a":[1,]}`, `{"a",1}`, `{"a":1,}`, `{"a":1}{"b":2}`, `{1:2}`, `{"a":[}`, `{"a":{]}`, `{"a":[1}}`, `{"a":{"b":1]}`,
	`[1}`, `{"a":1]`, `[1e5e3]`, `[1.5.3]`, `[1e5.3]`, `[0.1E+1]`, `[-01]`, `[-0]`, `[1E-0]`, `[1e+]`, `[2.]`, `"\u12"`, `"\uD83D\uDE00"`,
	`{"object":"\u0000error"}`, `{"object":"\u00e5rror"}`, `{"\u00e3hoices":[{"message":{"content":"a"}}]}`, `{"\u0163hoices":[{"message":{"content":"a"}}]}`,
}

// TestDocumentMatchesWholeDocument checks every case, cut at every position,
// against the whole-document reading, for both kinds of document.
func TestDocumentMatchesWholeDocument(t *testing.T) {
	for _, doc := range documentCases {
		body := []byte(doc)
		for _, api := range []API{APIChatCompletions, APIResponses} {
			want, wantEnded, wantFailed := wholeDocument(api, body)
			if wantEnded != json.Valid(body) {
				t.Fatalf("%v %s: the oracle says ended %v, json.Valid %v", api, doc, wantEnded, !wantEnded)
			}
			for _, pieces := range splits(body) {
				got, ended, failed := meterDocument(api, pieces...)
				if got != want || ended != wantEnded || failed != wantFailed {
					t.Fatalf("%v %.200q fed as %d pieces:\n got %+v, ended %v, failed %v\nwant %+v, ended %v, failed %v",
						api, doc, len(pieces), got, ended, failed, want, wantEnded, wantFailed)
				}
			}
		}
	}
}

// TestDocumentValidates checks that a document is complete exactly when
// encoding/json.Valid accepts it, nesting limit included.
func TestDocumentValidates(t *testing.T) {
	cases := append([]string{
		strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth),
		strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1),
		`{"a":` + strings.Repeat("[", maxNestingDepth-1) + strings.Repeat("]", maxNestingDepth-1) + `}`,
		`{"a":` + strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth) + `}`,
		strings.Repeat(`{"a":[`, 100) + strings.Repeat("]}", 100),
		strings.Repeat(`{"a":[`, 100) + "]]" + strings.Repeat("}]", 99),
		strings.Repeat("[", 100) + "1" + strings.Repeat("]", 30) + "}" + strings.Repeat("]", 69),
		strings.Repeat("[", 100) + "1" + strings.Repeat("]", 80) + "}" + strings.Repeat("]", 19),
	}, validCases...)
	for _, c := range append(cases, documentCases...) {
		want := json.Valid([]byte(c))
		for _, n := range []int{1, 3, 7, len(c) + 1} {
			var pieces [][]byte
			for p := range slices.Chunk([]byte(c), n) {
				pieces = append(pieces, p)
			}
			d := newDocument(APIChatCompletions)
			for _, p := range pieces {
				d.feed(p)
			}
			if d.complete() != want {
				t.Fatalf("%.80q in pieces of %d: complete() = %v, json.Valid %v", c, n, d.complete(), want)
			}
		}
	}
}

// FuzzDocument checks the document, fed in pieces cut anywhere, against the
// whole-document reading and encoding/json.Valid.
func FuzzDocument(f *testing.F) {
	for _, c := range append(documentCases, validCases...) {
		f.Add([]byte(c), uint8(0), uint64(1))
		f.Add([]byte(c), uint8(2), uint64(2))
	}
	for _, tc := range meterCases {
		if !tc.streaming {
			f.Add([]byte(strings.Join(tc.chunks, "")), uint8(tc.api-1), uint64(3))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, api uint8, cuts uint64) {
		if len(body) > maxFuzzInput {
			return
		}
		a := API(1 + api%3)
		want, wantEnded, wantFailed := wholeDocument(a, body)
		if wantEnded != json.Valid(body) {
			t.Fatalf("the oracle says ended %v for %q, json.Valid %v", wantEnded, body, !wantEnded)
		}
		rng := rand.New(rand.NewPCG(cuts, 0))
		var pieces [][]byte
		for rest := body; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 1+int(cuts%64)))
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		for _, p := range [][][]byte{{body}, pieces} {
			got, ended, failed := meterDocument(a, p...)
			if got != want || ended != wantEnded || failed != wantFailed {
				t.Fatalf("%v %q fed as %q:\n got %+v, ended %v, failed %v\nwant %+v, ended %v, failed %v",
					a, body, p, got, ended, failed, want, wantEnded, wantFailed)
			}
		}
	})
}

// hugeDocument writes a chat response whose content is size bytes long, in
// chunks of chunk bytes, to write.
func hugeDocument(size, chunk int, write func([]byte)) {
	const head, tail = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`,
		`"},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":16000000,"prompt_tokens_details":{"cached_tokens":8}}}`
	write([]byte(head))
	buf := []byte(strings.Repeat(`lorem ipsum \"dolor\" sit amet\n`, chunk/32+1)[:chunk])
	for n := 0; n < size; n += len(buf) {
		write(buf)
	}
	write([]byte(tail))
}

// TestDocumentConstantMemory meters a 64 MiB document in 8 KiB chunks: what
// the meter allocates does not grow with the document.
func TestDocumentConstantMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB")
	}
	m := NewMeter(APIChatCompletions, start)
	m.SetStreaming(false)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	hugeDocument(64<<20, 8<<10, func(p []byte) { m.Write(start, p) })
	o, ended := m.Observation(), m.Ended()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("metering a 64 MiB document allocated %d bytes", allocated)
	if allocated > 64<<10 {
		t.Errorf("metering a 64 MiB document allocated %d bytes, want under 64 KiB", allocated)
	}
	// 16,000,000 output tokens are implausible for one request.
	want := exporter.Observation{OutputTokens: 1, TokensEstimated: true, ImplausibleUsage: true, FinishReason: "length"}
	if !ended || o != want {
		t.Errorf("got %+v, ended %v; want %+v", o, ended, want)
	}
}

// BenchmarkDocument meters a 4 MiB chat response in 32 KiB chunks, as it
// passes (incremental) and as the meter did before (whole: keep the body,
// then read it once).
func BenchmarkDocument(b *testing.B) {
	var chunks [][]byte
	size := 0
	hugeDocument(4<<20, 32<<10, func(p []byte) {
		chunks = append(chunks, p)
		size += len(p)
	})
	b.Run("incremental", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			o, _, _ := meterDocument(APIChatCompletions, chunks...)
			if o.FinishReason != "length" {
				b.Fatal("document not read")
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			var body []byte
			for _, c := range chunks {
				body = append(body, c...)
			}
			if o, _, _ := wholeDocument(APIChatCompletions, body); o.FinishReason != "length" {
				b.Fatal("document not read")
			}
		}
	})
}
