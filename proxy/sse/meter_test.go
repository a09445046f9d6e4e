package sse

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

var start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const tick = 10 * time.Millisecond

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// frame is one SSE event carrying data.
func frame(data string) string { return "data: " + data + "\n\n" }

// named is one SSE event with an event name.
func named(name, data string) string { return "event: " + name + "\n" + frame(data) }

func chatDelta(delta string) string {
	return frame(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":null}],"usage":null}`)
}

func chatFinish(reason string) string {
	return frame(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}],"usage":null}`)
}

func chatUsageChunk(prompt, completion, cached int) string {
	return frame(`{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":` + strconv.Itoa(prompt) +
		`,"completion_tokens":` + strconv.Itoa(completion) + `,"total_tokens":` + strconv.Itoa(prompt+completion) +
		`,"prompt_tokens_details":{"cached_tokens":` + strconv.Itoa(cached) + `}}}`)
}

func completionText(text, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return frame(`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":` + text + `,"logprobs":null,"finish_reason":` + f + `}]}`)
}

func responsesDelta(typ, delta string) string {
	return named(typ, `{"type":"`+typ+`","item_id":"msg_1","output_index":0,"content_index":0,"delta":`+delta+`,"sequence_number":3}`)
}

func responsesEnd(typ, status, extra string) string {
	return named(typ, `{"type":"`+typ+`","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"`+status+`"`+extra+
		`,"usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":256},"output_tokens":42,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":342}}}`)
}

const (
	doneFrame        = "data: [DONE]\n\n"
	roleOnly         = `{"role":"assistant","content":""}`
	responsesCreated = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n\n"
)

type meterCase struct {
	name      string
	api       API
	streaming bool
	// chunks arrive one tick apart, the first at start + tick.
	chunks []string
	want   exporter.Observation
	ended  bool
}

var meterCases = []meterCase{
	{
		name: "chat with include_usage", api: APIChatCompletions, streaming: true,
		chunks: []string{chatDelta(roleOnly), chatDelta(`{"content":"Hel"}`), chatDelta(`{"content":"lo"}`), chatFinish("stop"), chatUsageChunk(120, 2, 64), doneFrame},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(30), OutputTokens: 2, PromptTokens: 120, CachedPromptTokens: 64, FinishReason: "stop"},
		ended:  true,
	},
	{
		name: "chat without usage counts output frames", api: APIChatCompletions, streaming: true,
		chunks: []string{chatDelta(roleOnly), chatDelta(`{"content":"a"}`), chatDelta(`{"content":"b"}`), chatDelta(`{"content":"c"}`), chatFinish("length"), doneFrame},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(40), OutputTokens: 3, TokensEstimated: true, FinishReason: "length"},
		ended:  true,
	},
	{
		name: "role-only, empty, null and finish-only frames do not count", api: APIChatCompletions, streaming: true,
		chunks: []string{chatDelta(`{"role":"assistant"}`), chatDelta(`{"content":""}`), chatDelta(`{"content":null,"reasoning_content":null,"tool_calls":[]}`), chatDelta(`{}`), chatDelta(`{"content":"x"}`), chatFinish("stop"), doneFrame},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(50), LastToken: ms(50), OutputTokens: 1, TokensEstimated: true, FinishReason: "stop"},
		ended:  true,
	},
	{
		name: "usage-only stream has no first token", api: APIChatCompletions, streaming: true,
		chunks: []string{chatDelta(roleOnly), chatFinish("stop"), chatUsageChunk(10, 0, 0), doneFrame},
		want:   exporter.Observation{PromptTokens: 10, FinishReason: "stop"},
		ended:  true,
	},
	{
		name: "reasoning counts as output", api: APIChatCompletions, streaming: true,
		chunks: []string{chatDelta(roleOnly), chatDelta(`{"reasoning_content":"hmm"}`), chatDelta(`{"reasoning":"so"}`), chatDelta(`{"content":"ok"}`), doneFrame},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(40), OutputTokens: 3, TokensEstimated: true},
		ended:  true,
	},
	{
		name: "tool call deltas count as output", api: APIChatCompletions, streaming: true,
		chunks: []string{
			chatDelta(`{"role":"assistant","content":null}`),
			chatDelta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`),
			chatDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Oslo\"}"}}]}`),
			chatFinish("tool_calls"), doneFrame,
		},
		want:  exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(30), OutputTokens: 2, TokensEstimated: true, FinishReason: "tool_calls"},
		ended: true,
	},
	{
		name: "content in the finishing frame counts", api: APIChatCompletions, streaming: true,
		chunks: []string{frame(`{"choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"stop"}]}`), doneFrame},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(10), LastToken: ms(10), OutputTokens: 1, TokensEstimated: true, FinishReason: "stop"},
		ended:  true,
	},
	{
		name: "stream cut before done", api: APIChatCompletions, streaming: true,
		chunks: []string{chatDelta(roleOnly), chatDelta(`{"content":"a"}`)},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(20), OutputTokens: 1, TokensEstimated: true},
	},
	{
		name: "malformed frames are skipped", api: APIChatCompletions, streaming: true,
		chunks: []string{
			frame(`{"choices":[{"delta":{"content":"truncated"`),
			frame(`not json`),
			frame(`{"choices":[{"delta":{"content":tru}}]}`),
			chatDelta(`{"content":"a"}`),
			frame(`{"choices":"odd","usage":"odd"}`),
			frame(`[1,2]`),
			doneFrame,
		},
		want:  exporter.Observation{FirstToken: true, TTFT: ms(40), LastToken: ms(40), OutputTokens: 1, TokensEstimated: true},
		ended: true,
	},
	{
		name: "comments, CRLF and multi-line data", api: APIChatCompletions, streaming: true,
		chunks: []string{
			": keep-alive\r\n\r\n",
			"data: {\"choices\":[{\"delta\":\r\ndata: {\"content\":\"a\"}}]}\r\n\r\n",
			": ping\r\r",
			"data: [DONE]\r\n\r\n",
		},
		want:  exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(20), OutputTokens: 1, TokensEstimated: true},
		ended: true,
	},
	{
		name: "continuous usage keeps the last report", api: APIChatCompletions, streaming: true,
		chunks: []string{
			frame(`{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`),
			frame(`{"choices":[{"delta":{"content":"b"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":null}}`),
			doneFrame,
		},
		want:  exporter.Observation{FirstToken: true, TTFT: ms(10), LastToken: ms(20), OutputTokens: 2, PromptTokens: 5},
		ended: true,
	},
	{
		name: "escaped keys", api: APIChatCompletions, streaming: true,
		chunks: []string{frame(`{"choices":[{"delta":{"\u0063ontent":"a"},"finish_\u0072eason":"st\u006fp"}]}`), doneFrame},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(10), LastToken: ms(10), OutputTokens: 1, TokensEstimated: true, FinishReason: "stop"},
		ended:  true,
	},
	{
		name: "completions text", api: APICompletions, streaming: true,
		chunks: []string{completionText(`""`, ""), completionText(`"Once"`, ""), completionText(`" upon"`, ""), completionText(`""`, "length"),
			frame(`{"id":"cmpl-1","object":"text_completion","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`), doneFrame},
		want:  exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(30), OutputTokens: 2, PromptTokens: 4, FinishReason: "length"},
		ended: true,
	},
	{
		name: "responses completed with usage", api: APIResponses, streaming: true,
		chunks: []string{
			responsesCreated,
			named("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}`),
			responsesDelta("response.output_text.delta", `""`),
			responsesDelta("response.output_text.delta", `"Hi"`),
			responsesDelta("response.output_text.delta", `" there"`),
			named("response.output_text.done", `{"type":"response.output_text.done","text":"Hi there"}`),
			responsesEnd("response.completed", "completed", ""),
		},
		want:  exporter.Observation{FirstToken: true, TTFT: ms(40), LastToken: ms(50), OutputTokens: 42, PromptTokens: 300, CachedPromptTokens: 256, FinishReason: "completed"},
		ended: true,
	},
	{
		name: "responses reasoning and function call deltas", api: APIResponses, streaming: true,
		chunks: []string{
			responsesCreated,
			responsesDelta("response.reasoning_summary_text.delta", `"think"`),
			responsesDelta("response.reasoning_text.delta", `"more"`),
			responsesDelta("response.function_call_arguments.delta", `"{\"q\":1}"`),
			named("response.function_call_arguments.done", `{"type":"response.function_call_arguments.done","arguments":"{\"q\":1}"}`),
		},
		want: exporter.Observation{FirstToken: true, TTFT: ms(20), LastToken: ms(40), OutputTokens: 3, TokensEstimated: true},
	},
	{
		name: "responses incomplete", api: APIResponses, streaming: true,
		chunks: []string{responsesDelta("response.output_text.delta", `"a"`), responsesEnd("response.incomplete", "incomplete", `,"incomplete_details":{"reason":"max_output_tokens"}`)},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(10), LastToken: ms(10), OutputTokens: 42, PromptTokens: 300, CachedPromptTokens: 256, FinishReason: "max_output_tokens"},
		ended:  true,
	},
	{
		name: "responses failed", api: APIResponses, streaming: true,
		chunks: []string{responsesCreated, named("response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"},"usage":null}}`)},
		want:   exporter.Observation{TokensEstimated: true, FinishReason: "failed"},
		ended:  true,
	},
	{
		name: "responses type from the event name when data has none", api: APIResponses, streaming: true,
		chunks: []string{named("response.output_text.delta", `{"delta":"a"}`), named("response.completed", `{"response":{"usage":{"output_tokens":1}}}`)},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(10), LastToken: ms(10), OutputTokens: 1, FinishReason: "completed"},
		ended:  true,
	},
	{
		name: "responses type from data without event names", api: APIResponses, streaming: true,
		chunks: []string{frame(`{"type":"response.output_text.delt\u0061","delta":"a"}`), frame(`{"type":"response.output_text.delta","delta":"b"}`), frame(`{"type":"error","message":"x"}`)},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(10), LastToken: ms(20), OutputTokens: 2, TokensEstimated: true},
	},
	{
		name: "responses stream does not end on [DONE]", api: APIResponses, streaming: true,
		chunks: []string{responsesDelta("response.output_text.delta", `"a"`), doneFrame},
		want:   exporter.Observation{FirstToken: true, TTFT: ms(10), LastToken: ms(10), OutputTokens: 1, TokensEstimated: true},
	},
	{
		name: "non-streaming chat", api: APIChatCompletions,
		chunks: []string{`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",`, `"content":"Hello"},"finish_reason":"stop"}],`,
			`"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n"},
		want:  exporter.Observation{OutputTokens: 12, PromptTokens: 9, CachedPromptTokens: 8, FinishReason: "stop"},
		ended: true,
	},
	{
		name: "non-streaming without usage", api: APIChatCompletions,
		chunks: []string{`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1"}]},"finish_reason":"tool_calls"}]}`},
		want:   exporter.Observation{OutputTokens: 1, TokensEstimated: true, FinishReason: "tool_calls"},
		ended:  true,
	},
	{
		name: "non-streaming truncated", api: APIChatCompletions,
		chunks: []string{`{"choices":[{"message":{"content":"Hello"},"finish_reason":"stop"}],"usage":{"completion_tokens":3`},
		want:   exporter.Observation{TokensEstimated: true},
	},
	{
		name: "non-streaming completions", api: APICompletions,
		chunks: []string{`{"choices":[{"text":"Once","finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":16}}`},
		want:   exporter.Observation{OutputTokens: 16, PromptTokens: 2, FinishReason: "length"},
		ended:  true,
	},
	{
		name: "non-streaming responses", api: APIResponses,
		chunks: []string{`{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message"}],`,
			`"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":5}}`},
		want:  exporter.Observation{OutputTokens: 5, PromptTokens: 7, FinishReason: "max_output_tokens"},
		ended: true,
	},
	{
		name: "non-streaming error body", api: APIChatCompletions,
		chunks: []string{`{"error":{"message":"model not found","type":"invalid_request_error"}}`},
		want:   exporter.Observation{TokensEstimated: true},
		ended:  true,
	},
	{
		name: "no body", api: APIChatCompletions, streaming: true,
		want: exporter.Observation{TokensEstimated: true},
	},
}

func measure(api API, streaming bool, chunks []string, at func(i int) time.Time) (exporter.Observation, bool) {
	m := NewMeter(api, start)
	m.SetStreaming(streaming)
	for i, c := range chunks {
		m.Write(at(i), []byte(c))
	}
	return m.Observation(), m.Ended()
}

func TestMeter(t *testing.T) {
	for _, tc := range meterCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ended := measure(tc.api, tc.streaming, tc.chunks, func(i int) time.Time { return start.Add(time.Duration(i+1) * tick) })
			if got != tc.want {
				t.Errorf("Observation() = %+v\nwant            %+v", got, tc.want)
			}
			if ended != tc.ended {
				t.Errorf("Ended() = %v, want %v", ended, tc.ended)
			}
		})
	}
}

// TestMeterSplitAnywhere feeds each body in one piece, byte by byte and split
// in two at every position, all at one instant: the results must not depend
// on where the body was cut.
func TestMeterSplitAnywhere(t *testing.T) {
	at := func(int) time.Time { return start.Add(tick) }
	for _, tc := range meterCases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(strings.Join(tc.chunks, ""))
			want, wantEnded := measure(tc.api, tc.streaming, []string{string(body)}, at)
			if want.FirstToken != tc.want.FirstToken || want.OutputTokens != tc.want.OutputTokens || wantEnded != tc.ended {
				t.Fatalf("in one piece: %+v, ended %v; want %+v, ended %v", want, wantEnded, tc.want, tc.ended)
			}
			for _, pieces := range splits(body) {
				chunks := make([]string, len(pieces))
				for i, p := range pieces {
					chunks[i] = string(p)
				}
				got, ended := measure(tc.api, tc.streaming, chunks, at)
				if got != want || ended != wantEnded {
					t.Fatalf("fed as %q: %+v, ended %v; in one piece: %+v, ended %v", chunks, got, ended, want, wantEnded)
				}
			}
		})
	}
}

func TestMeterFrameTimeIsArrivalOfItsLastByte(t *testing.T) {
	m := NewMeter(APIChatCompletions, start)
	f := chatDelta(`{"content":"a"}`)
	m.Write(start.Add(ms(5)), []byte(f[:20]))
	m.Write(start.Add(ms(7)), []byte(f[20:len(f)-1]))
	if m.Observation().FirstToken {
		t.Fatal("first token before the frame ended")
	}
	m.Write(start.Add(ms(9)), []byte(f[len(f)-1:]))
	if got := m.Observation(); !got.FirstToken || got.TTFT != ms(9) {
		t.Fatalf("got %+v, want TTFT 9ms", got)
	}
}

// TestMeterLargeDocument meters a document larger than any bound the meter
// once had (it kept up to 8 MiB): it is read to its end all the same.
func TestMeterLargeDocument(t *testing.T) {
	content := strings.Repeat("a", 9<<20)
	body := `{"choices":[{"message":{"content":"` + content + `\"}]"},"finish_reason":"stop"}],"usage":{"completion_tokens":3}}`
	for _, tc := range []struct {
		name string
		body string
		want exporter.Observation
	}{
		{"complete", body + "\n", exporter.Observation{OutputTokens: 3, FinishReason: "stop"}},
		{"truncated", body[:len(body)-1], exporter.Observation{TokensEstimated: true}},
		{"trailing garbage", body + "x", exporter.Observation{TokensEstimated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMeter(APIChatCompletions, start)
			m.SetStreaming(false)
			for c := range slices.Chunk([]byte(tc.body), 64<<10) {
				m.Write(start, c)
			}
			if ended := tc.want.FinishReason != ""; m.Ended() != ended {
				t.Fatalf("Ended() = %v, want %v", m.Ended(), ended)
			}
			if got := m.Observation(); got != tc.want {
				t.Fatalf("Observation() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMeterVirtualTime runs a stream the way the proxy does, stamping each
// chunk with time.Now as it arrives, in a synctest bubble so the waits cost
// nothing and the timings are exact.
func TestMeterVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chunks := make(chan string)
		go func() {
			defer close(chunks)
			time.Sleep(50 * time.Millisecond)
			chunks <- chatDelta(roleOnly)
			time.Sleep(200 * time.Millisecond)
			chunks <- chatDelta(`{"content":"a"}`)
			for range 9 {
				time.Sleep(20 * time.Millisecond)
				chunks <- chatDelta(`{"content":"b"}`)
			}
			chunks <- chatUsageChunk(100, 10, 0) + doneFrame
		}()
		m := NewMeter(APIChatCompletions, time.Now())
		for c := range chunks {
			m.Write(time.Now(), []byte(c))
		}
		got := m.Observation()
		itl, ok := got.InterTokenLatency()
		if !m.Ended() || got.TTFT != ms(250) || got.LastToken != ms(430) || got.OutputTokens != 10 || !ok || itl != ms(20) {
			t.Fatalf("got %+v, ended %v, inter-token latency %v", got, m.Ended(), itl)
		}
	})
}

func TestMeterDoesNotRetainInput(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		body := `{"choices":[{"message":{"content":"a"},"delta":{"content":"a"}}],"usage":{"completion_tokens":7}}`
		if streaming {
			body = frame(body)
		}
		m := NewMeter(APIChatCompletions, time.Time{})
		m.SetStreaming(streaming)
		chunk := []byte(body[:len(body)-3])
		m.Write(time.Time{}, chunk)
		copy(chunk, strings.Repeat("x", len(chunk)))
		m.Write(time.Time{}, []byte(body[len(body)-3:]))
		if got := m.Observation(); got.OutputTokens != 7 || got.FirstToken != streaming || got.TTFT != 0 {
			t.Errorf("streaming %v: got %+v, want 7 output tokens", streaming, got)
		}
	}
}

func TestMeterFailed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		api       API
		streaming bool
		chunks    []string
		failed    bool
	}{
		{"chat completed", APIChatCompletions, true, []string{chatDelta(`{"content":"a"}`), chatFinish("stop"), doneFrame}, false},
		{"chat error frame then [DONE]", APIChatCompletions, true,
			[]string{chatDelta(`{"content":"a"}`), frame(`{"error":{"object":"error","message":"engine failed","code":500}}`), doneFrame}, true},
		{"chat error object frame then [DONE]", APIChatCompletions, true,
			[]string{chatDelta(`{"content":"a"}`), frame(`{"object":"error","message":"engine failed","type":"InternalServerError","param":null,"code":500}`), doneFrame}, true},
		{"chat null error", APIChatCompletions, true, []string{frame(`{"choices":[{"delta":{"content":"a"}}],"error":null}`), doneFrame}, false},
		{"completions error frame", APICompletions, true, []string{completionText("a", ""), frame(`{"error":{"message":"boom"}}`), doneFrame}, true},
		{"responses completed", APIResponses, true, []string{responsesDelta("response.output_text.delta", `"a"`), responsesEnd("response.completed", "completed", "")}, false},
		{"responses failed", APIResponses, true, []string{responsesCreated, named("response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}`)}, true},
		{"responses error event", APIResponses, true, []string{responsesDelta("response.output_text.delta", `"a"`), named("error", `{"type":"error","code":"server_error","message":"boom"}`)}, true},
		{"non-streaming error body", APIChatCompletions, false, []string{`{"error":{"message":"model not found","type":"invalid_request_error"}}`}, true},
		{"non-streaming chat", APIChatCompletions, false, []string{`{"choices":[{"message":{"content":"Hello"},"finish_reason":"stop"}]}`}, false},
		{"non-streaming failed response", APIResponses, false, []string{`{"object":"response","status":"failed","error":{"code":"server_error"},"output":[]}`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMeter(tc.api, start)
			m.SetStreaming(tc.streaming)
			for i, c := range tc.chunks {
				m.Write(start.Add(time.Duration(i+1)*tick), []byte(c))
			}
			if got := m.Failed(); got != tc.failed {
				t.Errorf("Failed() = %v, want %v", got, tc.failed)
			}
		})
	}
}

// TestMeterFrameAllocs checks that measuring a chat frame, and a Responses
// delta event, allocates nothing once the meter's buffers have grown.
func TestMeterFrameAllocs(t *testing.T) {
	frames := map[API][]byte{
		APIChatCompletions: chatStream(1)[1],
		APIResponses:       []byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\" tok\"}\n\n"),
	}
	for api, frame := range frames {
		m := NewMeter(api, start)
		m.Write(start, frame)
		if n := testing.AllocsPerRun(100, func() { m.Write(start, frame) }); n != 0 {
			t.Errorf("%v: %v allocations per frame, want 0", api, n)
		}
		// One write before, one warm-up run and 100 measured runs.
		if o := m.Observation(); o.OutputTokens != 102 {
			t.Errorf("%v: %d output frames counted, want 102", api, o.OutputTokens)
		}
	}
}

// TestMeterFinishReasonBound feeds finish reasons of every length that
// matters, a 900 KB one included, in stream frames and in documents.
func TestMeterFinishReasonBound(t *testing.T) {
	huge := strings.Repeat("x", 900<<10)
	for _, tc := range []struct {
		name, quoted, want string
	}{
		{"short", `"stop"`, "stop"},
		{"empty", `""`, ""},
		{"at the bound", `"` + strings.Repeat("x", MaxFinishReasonBytes) + `"`, strings.Repeat("x", MaxFinishReasonBytes)},
		{"one over", `"` + strings.Repeat("x", MaxFinishReasonBytes+1) + `"`, FinishReasonOther},
		{"escaped at the bound", `"` + strings.Repeat(`\u00e9`, MaxFinishReasonBytes/2) + `"`, strings.Repeat("é", MaxFinishReasonBytes/2)},
		{"escaped one over", `"` + strings.Repeat(`\u00e9`, MaxFinishReasonBytes/2) + `x"`, FinishReasonOther},
		{"900 KB", `"` + huge + `"`, FinishReasonOther},
	} {
		chat := `{"choices":[{"index":0,"delta":{},"message":{},"finish_reason":` + tc.quoted + `}]}`
		incomplete := `{"status":"incomplete","incomplete_details":{"reason":` + tc.quoted + `}}`
		status := `{"status":` + tc.quoted + `}`
		for _, c := range []struct {
			name      string
			api       API
			streaming bool
			body      string
			fallback  string // the finish reason when tc's is empty
		}{
			{"chat frame", APIChatCompletions, true, frame(chat), ""},
			{"chat document", APIChatCompletions, false, chat, ""},
			{"responses reason in an event", APIResponses, true, named("response.incomplete", `{"type":"response.incomplete","response":`+incomplete+`}`), "incomplete"},
			{"responses reason in a document", APIResponses, false, incomplete, "incomplete"},
			{"responses status in a document", APIResponses, false, status, ""},
		} {
			want := cmp.Or(tc.want, c.fallback)
			o, _ := measure(c.api, c.streaming, []string{c.body}, func(int) time.Time { return start })
			if o.FinishReason != want {
				t.Errorf("%s, %s: FinishReason = %.80q, want %q", tc.name, c.name, o.FinishReason, want)
			}
		}
	}
}

// TestMeterImplausibleUsage: usage that cannot be true is reported as
// absent and flagged; a number that is not a count is simply absent.
func TestMeterImplausibleUsage(t *testing.T) {
	usage := func(completion, prompt, cached string) string {
		return `{"choices":[],"usage":{"prompt_tokens":` + prompt + `,"completion_tokens":` + completion +
			`,"prompt_tokens_details":{"cached_tokens":` + cached + `}}}`
	}
	const absent = -1
	for _, tc := range []struct {
		name                       string
		completion, prompt, cached string
		output, promptTokens       int // absent: reported as absent
		implausible                bool
	}{
		{"plausible", "5", "100", "64", 5, 100, false},
		{"at the bound", "10000000", "10000000", "10000000", 10_000_000, 10_000_000, false},
		{"output over the bound", "10000001", "100", "0", absent, absent, true},
		{"prompt over the bound", "5", "10000001", "0", absent, absent, true},
		{"18 digits", "999999999999999999", "100", "0", absent, absent, true},
		{"40 digits", strings.Repeat("9", 40), "100", "0", absent, absent, true},
		{"more cached than prompt", "5", "100", "101", absent, absent, true},
		{"exponent is not a count", "1e3", "100", "0", absent, 100, false},
		{"huge exponent is not a count", "1e999999", "100", "0", absent, 100, false},
		{"fraction is not a count", "1.5", "100", "0", absent, 100, false},
		{"negative is not a count", "-1", "100", "0", absent, 100, false},
		{"string is not a count", `"5"`, "100", "0", absent, 100, false},
	} {
		body := usage(tc.completion, tc.prompt, tc.cached)
		for _, streaming := range []bool{true, false} {
			chunks := []string{body}
			if streaming {
				chunks = []string{chatDelta(`{"content":"a"}`), chatDelta(`{"content":"b"}`), frame(body), doneFrame}
			}
			o, _ := measure(APIChatCompletions, streaming, chunks, func(int) time.Time { return start.Add(tick) })
			frames := 0
			if streaming {
				frames = 2
			}
			want := exporter.Observation{FirstToken: streaming, TTFT: ms(10), LastToken: ms(10), OutputTokens: tc.output, ImplausibleUsage: tc.implausible}
			if !streaming {
				want.TTFT, want.LastToken = 0, 0
			}
			if tc.output == absent {
				want.OutputTokens, want.TokensEstimated = frames, true
			}
			if tc.promptTokens != absent {
				want.PromptTokens = tc.promptTokens
				want.CachedPromptTokens, _ = strconv.Atoi(tc.cached)
			}
			if o != want {
				t.Errorf("%s, streaming %v: %+v\nwant %+v", tc.name, streaming, o, want)
			}
		}
	}
	completed := named("response.completed", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":7,"output_tokens":999999999999999999}}}`)
	o, _ := measure(APIResponses, true, []string{responsesDelta("response.output_text.delta", `"a"`), completed}, func(int) time.Time { return start })
	if want := (exporter.Observation{FirstToken: true, OutputTokens: 1, TokensEstimated: true, ImplausibleUsage: true, FinishReason: "completed"}); o != want {
		t.Errorf("responses: %+v\nwant %+v", o, want)
	}
}
