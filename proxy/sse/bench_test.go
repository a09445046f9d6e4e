package sse

import (
	"fmt"
	"testing"
	"time"
)

// chatStream returns the frames of a realistic chat stream with n content
// frames: a role-only first chunk, content chunks, a finish chunk, the
// usage-only chunk of include_usage, and [DONE].
func chatStream(n int) [][]byte {
	const head = `data: {"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1764478654,"model":"meta-llama/Llama-3.1-8B-Instruct","system_fingerprint":null,"choices":[`
	frames := [][]byte{[]byte(head + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")}
	for i := range n {
		frames = append(frames, fmt.Appendf(nil, head+`{"index":0,"delta":{"content":" tok%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i))
	}
	frames = append(frames,
		[]byte(head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":null}`+"\n\n"),
		fmt.Appendf(nil, head+`],"usage":{"prompt_tokens":1312,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":1024}}}`+"\n\n", 1312+n, n),
		[]byte("data: [DONE]\n\n"))
	return frames
}

func BenchmarkMeter(b *testing.B) {
	frames := chatStream(200)
	size := 0
	for _, f := range frames {
		size += len(f)
	}
	start := time.Unix(1764478654, 0)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		m := NewMeter(APIChatCompletions, start)
		for i, f := range frames {
			m.Write(start.Add(time.Duration(i)*time.Millisecond), f)
		}
		if !m.Ended() || m.Observation().OutputTokens != 200 {
			b.Fatal("stream not measured")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
}
