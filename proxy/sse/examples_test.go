package sse_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/kestrelops/tandem/proxy/sse"
)

// A Meter sees a chat stream chunk by chunk, stamped with each chunk's
// arrival. The role-only first chunk is not the first token.
func ExampleMeter() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	chunks := []string{
		`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n",
		`data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}` + "\n\n",
		`data: {"choices":[{"index":0,"delta":{"content":" world"}}]}` + "\n\n",
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		`data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n\n",
		"data: [DONE]\n\n",
	}

	api := sse.APIChatCompletions
	m := sse.NewMeter(api, start)
	m.SetStreaming(sse.IsEventStream("text/event-stream; charset=utf-8"))
	for i, c := range chunks {
		m.Write(start.Add(time.Duration(100+20*i)*time.Millisecond), []byte(c))
	}

	o := m.Observation()
	fmt.Println("api:", api)
	fmt.Println("ended:", m.Ended())
	fmt.Println("ttft:", o.TTFT, "last token:", o.LastToken)
	fmt.Println("output tokens:", o.OutputTokens, "estimated:", o.TokensEstimated)
	fmt.Println("prompt tokens:", o.PromptTokens, "cached:", o.CachedPromptTokens)
	fmt.Println("finish reason:", o.FinishReason)
	// Output:
	// api: chat_completions
	// ended: true
	// ttft: 120ms last token: 140ms
	// output tokens: 2 estimated: false
	// prompt tokens: 12 cached: 8
	// finish reason: stop
}

// A Parser turns bytes split anywhere, here into 7-byte chunks, into events.
func ExampleParser() {
	var p sse.Parser
	stream := "event: response.output_text.delta\r\ndata: {\"delta\":\r\ndata: \"Hi\"}\r\n\r\n: keep-alive\r\n\r\n"
	for chunk := range slices.Chunk([]byte(stream), 7) {
		p.Feed(chunk, func(e sse.Event) {
			fmt.Printf("%s %q\n", e.Name, e.Data)
		})
	}
	// Output:
	// response.output_text.delta "{\"delta\":\n\"Hi\"}"
}
