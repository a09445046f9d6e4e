package proxy

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// streamChat streams one chat completion with the official OpenAI client.
func streamChat(t *testing.T, baseURL string) openai.ChatCompletion {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(baseURL+"/v1"), option.WithAPIKey("sk-client"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "test-model",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Count to seven.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream from %s: %v", baseURL, err)
	}
	return acc.ChatCompletion
}

func TestOpenAIClientStreamsThroughTandem(t *testing.T) {
	r := newRig(t, testupstream.Script{Tokens: 7}, testupstream.Script{Tokens: 7}, testupstream.Script{Tokens: 7}, nil)
	direct := streamChat(t, r.prod.URL)
	proxied := streamChat(t, r.front.URL)

	if len(proxied.Choices) != 1 || proxied.Choices[0].Message.Content != direct.Choices[0].Message.Content {
		t.Fatalf("content through tandem %q, directly %q", proxied.Choices[0].Message.Content, direct.Choices[0].Message.Content)
	}
	if direct.Choices[0].Message.Content == "" {
		t.Fatal("the fake upstream streamed no content")
	}
	if proxied.Usage.CompletionTokens != 7 || proxied.Usage.CompletionTokens != direct.Usage.CompletionTokens || proxied.Usage.PromptTokens != direct.Usage.PromptTokens {
		t.Fatalf("usage through tandem %+v, directly %+v", proxied.Usage, direct.Usage)
	}
	r.front.Close() // the client stops reading at [DONE]: let tandem's handler read the end first
	r.idle()
	for _, config := range exporter.Configs {
		if n := r.value(t, exporter.MetricTimeToFirstToken, map[string]string{"config": config, "class": "fresh"}); n != 1 {
			t.Errorf("%s TTFT observations = %v, want 1", config, n)
		}
		if n := r.value(t, exporter.MetricOutputTokens, map[string]string{"config": config, "class": "fresh"}); n != 7 {
			t.Errorf("%s output tokens = %v, want 7", config, n)
		}
	}
}
