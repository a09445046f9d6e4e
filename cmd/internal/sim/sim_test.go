package sim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/sim"
	"github.com/kestrelops/tandem/cmd/internal/sim/inproc"
)

// exact is a profile with round numbers, so that timings can be computed by
// hand: a lone sequence's step is 10ms + 2ms, a prefill 5ms + 1ms a token.
var exact = sim.Params{
	Model:             "exact",
	PrefillOverhead:   5 * time.Millisecond,
	PrefillPerToken:   time.Millisecond,
	StepBase:          10 * time.Millisecond,
	StepPerSeq:        2 * time.Millisecond,
	MaxNumSeqs:        2,
	PrefixCacheBlocks: 100,
	BlockSize:         4,
	OutputMean:        20,
	OutputSpread:      0.5,
}

// frame is one SSE data line and when it arrived, relative to the request.
type frame struct {
	at    time.Duration
	event string
	data  string
}

type streamed struct {
	status int
	frames []frame
	err    error
}

// content returns the arrival times and texts of frames carrying output.
func (s streamed) content(t *testing.T) (times []time.Duration, texts []string) {
	t.Helper()
	for _, f := range s.frames {
		if f.data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(f.data), &c); err != nil {
			t.Fatalf("frame %q: %v", f.data, err)
		}
		for _, ch := range c.Choices {
			if text := ch.Text + ch.Delta.Content; text != "" {
				times = append(times, f.at)
				texts = append(texts, text)
			}
		}
	}
	return times, texts
}

func (s streamed) last(t *testing.T) map[string]any {
	t.Helper()
	for i := len(s.frames) - 1; i >= 0; i-- {
		if s.frames[i].data != "[DONE]" {
			var v map[string]any
			if err := json.Unmarshal([]byte(s.frames[i].data), &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no frames")
	return nil
}

func post(ctx context.Context, t *testing.T, h http.Handler, path string, body any) streamed {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sim"+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := inproc.Client(h).Do(req)
	if err != nil {
		return streamed{err: err}
	}
	defer resp.Body.Close()
	out := streamed{status: resp.StatusCode}
	r := bufio.NewReader(resp.Body)
	event := ""
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			out.frames = append(out.frames, frame{at: time.Since(start), event: event, data: strings.TrimPrefix(line, "data: ")})
			event = ""
		case line != "" && !strings.HasPrefix(line, "{"):
			t.Fatalf("unexpected line %q", line)
		case line != "":
			out.frames = append(out.frames, frame{at: time.Since(start), data: line})
		}
		if err != nil {
			if err != io.EOF {
				out.err = err
			}
			return out
		}
	}
}

func words(n int, prefix string) string {
	w := make([]string, n)
	for i := range w {
		w[i] = prefix + string(rune('a'+i%26))
	}
	return strings.Join(w, " ")
}

func completion(prompt string, maxTokens int) map[string]any {
	return map[string]any{"model": "m", "prompt": prompt, "stream": true, "max_tokens": maxTokens,
		"stream_options": map[string]any{"include_usage": true}}
}

func cachedTokens(t *testing.T, s streamed) float64 {
	t.Helper()
	usage, ok := s.last(t)["usage"].(map[string]any)
	if !ok {
		t.Fatalf("last frame has no usage: %+v", s.last(t))
	}
	return usage["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
}

func TestPrefixHitLowersTTFT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(exact, 1)
		defer s.Close()
		prompt := words(41, "w")
		cold := post(t.Context(), t, s, "/v1/completions", completion(prompt, 3))
		warm := post(t.Context(), t, s, "/v1/completions", completion(prompt, 3))
		coldTimes, _ := cold.content(t)
		warmTimes, _ := warm.content(t)
		// Cold: prefill 5 + 41×1, step 10 + 2. Warm: 40 of 41 tokens cached.
		if want := 58 * time.Millisecond; coldTimes[0] != want {
			t.Errorf("cold TTFT = %v, want %v", coldTimes[0], want)
		}
		if want := 18 * time.Millisecond; warmTimes[0] != want {
			t.Errorf("warm TTFT = %v, want %v", warmTimes[0], want)
		}
		if got := cachedTokens(t, cold); got != 0 {
			t.Errorf("cold cached_tokens = %v, want 0", got)
		}
		if got := cachedTokens(t, warm); got != 40 {
			t.Errorf("warm cached_tokens = %v, want 40", got)
		}
	})
}

func TestPrefixCacheDisabledAndEvicted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blocks int
	}{{"disabled", 0}, {"too small to keep the prompt", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := exact
				p.PrefixCacheBlocks = tc.blocks
				s := sim.New(p, 1)
				defer s.Close()
				prompt := words(41, "w")
				post(t.Context(), t, s, "/v1/completions", completion(prompt, 1))
				again := post(t.Context(), t, s, "/v1/completions", completion(prompt, 1))
				times, _ := again.content(t)
				if want := 58 * time.Millisecond; times[0] != want {
					t.Errorf("TTFT = %v, want %v", times[0], want)
				}
				if got := cachedTokens(t, again); got != 0 {
					t.Errorf("cached_tokens = %v, want 0", got)
				}
			})
		})
	}
}

// concurrently posts every body at the same instant and returns the
// responses in body order.
func concurrently(t *testing.T, h http.Handler, path string, bodies ...any) []streamed {
	out := make([]streamed, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() { out[i] = post(t.Context(), t, h, path, b) })
	}
	wg.Wait()
	return out
}

func TestQueueingAddsToTTFT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(exact, 1)
		defer s.Close()
		res := concurrently(t, s, "/v1/completions",
			completion("x", 3), completion("y", 3), completion("z", 3))
		var ttfts []time.Duration
		for _, r := range res {
			times, _ := r.content(t)
			ttfts = append(ttfts, times[0])
		}
		slices.Sort(ttfts)
		// Two admitted at once: prefills of 5+1ms, then steps of 10 + 2×2ms
		// ending at 20, 34 and 48ms; the third is admitted at 48ms: 6 + 12ms
		// more.
		want := []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 66 * time.Millisecond}
		if !slices.Equal(ttfts, want) {
			t.Errorf("TTFTs = %v, want %v", ttfts, want)
		}
	})
}

func TestLargerBatchSlowsSteps(t *testing.T) {
	gaps := func(t *testing.T, n int) []time.Duration {
		s := sim.New(exact, 1)
		defer s.Close()
		bodies := make([]any, n)
		for i := range bodies {
			bodies[i] = completion("p", 4)
		}
		times, _ := concurrently(t, s, "/v1/completions", bodies...)[0].content(t)
		var out []time.Duration
		for i := 1; i < len(times); i++ {
			out = append(out, times[i]-times[i-1])
		}
		return out
	}
	synctest.Test(t, func(t *testing.T) {
		alone, paired := gaps(t, 1), gaps(t, 2)
		if want := []time.Duration{12 * time.Millisecond, 12 * time.Millisecond, 12 * time.Millisecond}; !slices.Equal(alone, want) {
			t.Errorf("gaps alone = %v, want %v", alone, want)
		}
		if want := []time.Duration{14 * time.Millisecond, 14 * time.Millisecond, 14 * time.Millisecond}; !slices.Equal(paired, want) {
			t.Errorf("gaps in a batch of two = %v, want %v", paired, want)
		}
	})
}

func chatText(t *testing.T, s *sim.Server, seed int64, body map[string]any) (string, float64) {
	t.Helper()
	r := post(t.Context(), t, s, "/v1/chat/completions", body)
	if r.status != http.StatusOK || len(r.frames) != 1 {
		t.Fatalf("status %d, frames %v", r.status, r.frames)
	}
	var v struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens float64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(r.frames[0].data), &v); err != nil {
		t.Fatal(err)
	}
	return v.Choices[0].Message.Content, v.Usage.CompletionTokens
}

func TestSameSeedSameOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": "tell me a story"}}}
		text := func(seed int64) (string, float64) {
			s := sim.New(exact, seed)
			defer s.Close()
			busy := post // a concurrent request must not change the output
			var wg sync.WaitGroup
			wg.Go(func() { busy(t.Context(), t, s, "/v1/completions", completion("other", 7)) })
			defer wg.Wait()
			return chatText(t, s, seed, body)
		}
		a, na := text(7)
		b, nb := text(7)
		c, _ := text(8)
		if a == "" || a != b || na != nb {
			t.Errorf("seed 7 gave %q (%v tokens) and %q (%v tokens)", a, na, b, nb)
		}
		if float64(len(strings.Fields(a))) != na {
			t.Errorf("text has %d words, usage says %v tokens", len(strings.Fields(a)), na)
		}
		if a == c {
			t.Errorf("seeds 7 and 8 gave the same output %q", a)
		}
	})
}

func TestMaxTokensHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(exact, 1)
		defer s.Close()
		for _, field := range []string{"max_tokens", "max_completion_tokens"} {
			body := map[string]any{"model": "echo-me", field: 5, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
			text, n := chatText(t, s, 1, body)
			if n != 5 || len(strings.Fields(text)) != 5 {
				t.Errorf("%s=5: %v tokens, text %q", field, n, text)
			}
		}
	})
}

func TestChatStreamShape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(exact, 1)
		defer s.Close()
		r := post(t.Context(), t, s, "/v1/chat/completions", map[string]any{
			"model": "echo-me", "stream": true, "max_tokens": 3,
			"stream_options": map[string]any{"include_usage": true},
			"messages":       []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}},
		})
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("status %d, err %v", r.status, r.err)
		}
		var got []string
		for _, f := range r.frames {
			if f.data == "[DONE]" {
				got = append(got, "[DONE]")
				continue
			}
			var c struct {
				Model   string           `json:"model"`
				Object  string           `json:"object"`
				Choices []map[string]any `json:"choices"`
				Usage   map[string]any   `json:"usage"`
			}
			if err := json.Unmarshal([]byte(f.data), &c); err != nil {
				t.Fatal(err)
			}
			if c.Model != "echo-me" || c.Object != "chat.completion.chunk" {
				t.Errorf("model %q object %q", c.Model, c.Object)
			}
			switch {
			case len(c.Choices) == 0 && c.Usage != nil:
				got = append(got, "usage")
				// 1 + 2 words + 1 + 2 words: each message adds its role.
				if c.Usage["prompt_tokens"] != 6.0 || c.Usage["completion_tokens"] != 3.0 {
					t.Errorf("usage = %v", c.Usage)
				}
			case c.Choices[0]["finish_reason"] != nil:
				got = append(got, "finish:"+c.Choices[0]["finish_reason"].(string))
			default:
				d := c.Choices[0]["delta"].(map[string]any)
				if d["role"] == "assistant" && len(d) == 1 {
					got = append(got, "role")
				} else if d["content"] != "" {
					got = append(got, "content")
				}
			}
		}
		want := []string{"role", "content", "content", "content", "finish:length", "usage", "[DONE]"}
		if !slices.Equal(got, want) {
			t.Errorf("frames = %v, want %v", got, want)
		}
		if r.frames[0].at != 0 {
			t.Errorf("role chunk at %v, want at once", r.frames[0].at)
		}
	})
}

func TestResponsesStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(exact, 1)
		defer s.Close()
		r := post(t.Context(), t, s, "/v1/responses", map[string]any{
			"model": "m", "stream": true, "max_output_tokens": 2, "instructions": "be brief", "input": "hello world",
		})
		var events []string
		for _, f := range r.frames {
			events = append(events, f.event)
		}
		want := []string{"response.created", "response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.completed"}
		if !slices.Equal(events, want) {
			t.Fatalf("events = %v, want %v", events, want)
		}
		var done struct {
			Response struct {
				Status string `json:"status"`
				Usage  struct {
					InputTokens        int `json:"input_tokens"`
					OutputTokens       int `json:"output_tokens"`
					InputTokensDetails struct {
						CachedTokens *int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				} `json:"usage"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(r.frames[len(r.frames)-1].data), &done); err != nil {
			t.Fatal(err)
		}
		u := done.Response.Usage
		if done.Response.Status != "completed" || u.InputTokens != 6 || u.OutputTokens != 2 || u.InputTokensDetails.CachedTokens == nil {
			t.Errorf("completed response = %+v", done.Response)
		}
	})
}

func TestModelsAndHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(exact, 1)
		defer s.Close()
		for path, want := range map[string]string{"/v1/models": `"id":"exact"`, "/health": `"ok"`} {
			req, _ := http.NewRequest(http.MethodGet, "http://sim"+path, nil)
			resp, err := inproc.Client(s).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
				t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
			}
		}
	})
}

func TestBadRequest(t *testing.T) {
	for name, body := range map[string]map[string]any{
		"no messages": {"model": "m", "messages": []any{}},
		// A real engine refuses limits beyond its context; the simulator must
		// not try to generate a billion tokens.
		"huge max_tokens": {"model": "m", "max_tokens": 1_000_000_000, "messages": []any{map[string]any{"role": "user", "content": "hi"}}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := sim.New(exact, 1)
				defer s.Close()
				r := post(t.Context(), t, s, "/v1/chat/completions", body)
				if r.status != http.StatusBadRequest || !strings.Contains(r.frames[0].data, "invalid_request_error") {
					t.Errorf("status %d, body %v", r.status, r.frames)
				}
			})
		})
	}
}

func TestFaults(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := exact
			p.ErrorRate = 1
			s := sim.New(p, 1)
			defer s.Close()
			r := post(t.Context(), t, s, "/v1/completions", completion("x", 3))
			if r.status != http.StatusInternalServerError || len(r.frames) != 1 || !strings.Contains(r.frames[0].data, `"error"`) {
				t.Errorf("status %d, body %v", r.status, r.frames)
			}
		})
	})
	t.Run("hang", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := exact
			p.HangRate = 1
			s := sim.New(p, 1)
			defer s.Close()
			ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			start := time.Now()
			r := post(ctx, t, s, "/v1/completions", completion("x", 3))
			if r.err == nil || len(r.frames) != 0 || time.Since(start) != time.Hour {
				t.Errorf("after %v: err %v, frames %v", time.Since(start), r.err, r.frames)
			}
		})
	})
	t.Run("cut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := exact
			p.CutRate = 1
			s := sim.New(p, 1)
			defer s.Close()
			r := post(t.Context(), t, s, "/v1/completions", completion("x", 10))
			times, _ := r.content(t)
			if r.err == nil || len(times) != 5 || slices.ContainsFunc(r.frames, func(f frame) bool { return f.data == "[DONE]" }) {
				t.Errorf("err %v, %d content frames, frames %v", r.err, len(times), r.frames)
			}
		})
	})
	t.Run("cut leaves whole responses alone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := exact
			p.CutRate = 1
			s := sim.New(p, 1)
			defer s.Close()
			if text, n := chatText(t, s, 1, map[string]any{"max_tokens": 4, "messages": []map[string]string{{"role": "user", "content": "x"}}}); n != 4 || text == "" {
				t.Errorf("text %q, %v tokens", text, n)
			}
		})
	})
}

func TestClientGoneLeavesEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := exact
		p.MaxNumSeqs = 1
		s := sim.New(p, 1)
		defer s.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() { post(ctx, t, s, "/v1/completions", completion("gone", 1000)) })
		time.Sleep(time.Millisecond)
		next := post(t.Context(), t, s, "/v1/completions", completion("next", 1))
		wg.Wait()
		// The abandoned sequence's steps end at 18ms and 30ms; canceled at
		// 20ms, it leaves at 30ms, and next (sent at 1ms) is admitted then:
		// its first token comes 6 + 12ms later, at 48ms.
		times, _ := next.content(t)
		if want := 47 * time.Millisecond; times[0] != want {
			t.Errorf("TTFT behind an abandoned request = %v, want %v", times[0], want)
		}
	})
}
