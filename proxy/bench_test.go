package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// BenchmarkProductionStream sends a streamed chat completion through the
// proxy's production path (no mirroring) to an upstream that writes prebuilt
// frames, and reports time and allocations per relayed frame. The client
// and the upstream share the process, so their costs are in the figures
// too; compare runs, not absolute values. Allocations per request that do
// not grow from 20 to 200 frames are per request, not per frame.
func BenchmarkProductionStream(b *testing.B) {
	for _, tokens := range []int{20, 200} {
		b.Run(fmt.Sprintf("frames=%d", tokens), func(b *testing.B) { benchmarkProductionStream(b, tokens) })
	}
}

func benchmarkProductionStream(b *testing.B, tokens int) {
	frames := streamFrames(tokens)
	prod := testupstream.New(testupstream.Script{Frames: frames})
	defer prod.Close()
	cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(map[string]string{"TANDEM_PRIMARY_URL": prod.URL}))
	if err != nil {
		b.Fatal(err)
	}
	m := exporter.New(prometheus.NewRegistry(), cfg.Classes(), nil, "bench", "bench")
	s, err := New(cfg, m, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	front := httptest.NewServer(s)
	defer front.Close()
	client := front.Client()
	want := int64(len(strings.Join(frames, "")))
	buf := make([]byte, 32<<10)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"benchmark %d"}]}`, i)
		resp, err := client.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
		resp.Body.Close()
		if err != nil || n != want {
			b.Fatalf("read %d of %d bytes: %v", n, want, err)
		}
		if i%1000 == 0 {
			prod.Forget()
		}
	}
	runtime.ReadMemStats(&after)
	perFrame := float64(b.N * len(frames))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perFrame, "ns/frame")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/perFrame, "allocs/frame")
}

// streamFrames is a vLLM-like chat stream of n content frames, one string
// per frame.
func streamFrames(n int) []string {
	const head = `data: {"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1764478654,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[`
	frames := []string{head + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"}
	for i := range n {
		frames = append(frames, fmt.Sprintf(head+`{"index":0,"delta":{"content":" tok%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i))
	}
	return append(frames,
		head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`+"\n\n",
		fmt.Sprintf(head+`],"usage":{"prompt_tokens":12,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n", n+12, n),
		"data: [DONE]\n\n")
}
