package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// OutcomeDropped marks a request not sent because MaxInFlight was reached.
// The other outcomes are exporter's.
const OutcomeDropped = "dropped"

// Request headers every request carries.
const (
	HeaderClass          = "X-Tandem-Loadgen-Class"
	HeaderConversationID = "X-Conversation-Id"
)

// Result is the client-side measurement of one request. TTFT, last token
// and duration are measured from Sent; Sent minus Scheduled is how late the
// generator was.
type Result struct {
	Index          int       `json:"index"`
	Class          string    `json:"class"`
	ConversationID string    `json:"conversation_id"`
	Turn           int       `json:"turn"`
	Scheduled      time.Time `json:"scheduled"`
	Sent           time.Time `json:"sent"`
	Outcome        string    `json:"outcome"`
	Status         int       `json:"status,omitempty"`
	// FirstToken is set when a frame with non-empty content arrived;
	// TTFTSeconds is the time from Sent to that frame's arrival.
	FirstToken       bool    `json:"first_token"`
	TTFTSeconds      float64 `json:"ttft_seconds"`
	LastTokenSeconds float64 `json:"last_token_seconds"`
	DurationSeconds  float64 `json:"duration_seconds"`
	// OutputTokens is usage.completion_tokens, or the number of content
	// frames when no usage arrived (TokensEstimated).
	OutputTokens       int    `json:"output_tokens"`
	TokensEstimated    bool   `json:"tokens_estimated,omitempty"`
	PromptWords        int    `json:"prompt_words"`
	PromptTokens       int    `json:"prompt_tokens"`
	CachedPromptTokens int    `json:"cached_prompt_tokens"`
	MaxTokens          int    `json:"max_tokens"`
	Error              string `json:"error,omitempty"`
}

// Observation is r's measurement, its timings rounded to the nanosecond
// and measured from Sent.
func (r Result) Observation() exporter.Observation {
	return exporter.Observation{
		Outcome:            r.Outcome,
		FirstToken:         r.FirstToken,
		TTFT:               duration(r.TTFTSeconds),
		LastToken:          duration(r.LastTokenSeconds),
		Duration:           duration(r.DurationSeconds),
		OutputTokens:       r.OutputTokens,
		TokensEstimated:    r.TokensEstimated,
		PromptTokens:       r.PromptTokens,
		CachedPromptTokens: r.CachedPromptTokens,
	}
}

func duration(seconds float64) time.Duration {
	return time.Duration(math.Round(seconds * float64(time.Second)))
}

// Progress is a snapshot of a run, reported about once a second.
type Progress struct {
	Elapsed   time.Duration
	Sent      int
	Completed int
	Failed    int
	Dropped   int
	InFlight  int
}

type counters struct {
	sent, completed, failed, dropped, inFlight atomic.Int64
}

func (c *counters) snapshot(elapsed time.Duration) Progress {
	return Progress{
		Elapsed:   elapsed,
		Sent:      int(c.sent.Load()),
		Completed: int(c.completed.Load()),
		Failed:    int(c.failed.Load()),
		Dropped:   int(c.dropped.Load()),
		InFlight:  int(c.inFlight.Load()),
	}
}

// schedule yields the offsets from the start at which requests are due.
type schedule struct {
	rate    float64
	poisson bool
	rng     *rand.Rand
	next    time.Duration
	i       int
}

func newSchedule(c Config) *schedule {
	return &schedule{rate: c.Rate, poisson: c.Arrivals == ArrivalsPoisson, rng: rand.New(rand.NewPCG(uint64(c.Seed), 0x61727276))}
}

func (s *schedule) advance() time.Duration {
	at := s.next
	gap := 1 / s.rate
	if s.poisson {
		gap = s.rng.ExpFloat64() / s.rate
	}
	s.i++
	if s.poisson {
		s.next += time.Duration(gap * float64(time.Second))
	} else {
		s.next = time.Duration(float64(s.i) / s.rate * float64(time.Second))
	}
	return at
}

// Run sends the configured load and returns its summary and every request's
// result, in schedule order. It stops scheduling at c.Duration or after
// c.Requests, then waits for requests in flight; when ctx ends it stops
// scheduling and cancels them. progress, if not nil, is called about once a
// second and once at the end.
func Run(ctx context.Context, c Config, progress func(Progress)) (*Summary, []Result, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	client := c.Client
	if client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = c.MaxInFlight
		client = &http.Client{Transport: t}
	}
	endpoint := strings.TrimSuffix(c.Target, "/") + "/v1/chat/completions"
	sched := newSchedule(c)
	work := newWorkload(c)
	var (
		cnt     counters
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []Result
	)
	start := time.Now()
	stopProgress := reportProgress(progress, start, &cnt)
	for i := 0; c.Requests == 0 || i < c.Requests; i++ {
		offset := sched.advance()
		if c.Duration > 0 && offset >= c.Duration {
			break
		}
		req := work.next()
		due := start.Add(offset)
		if !sleepUntil(ctx, due) {
			break
		}
		res := Result{
			Index:          i,
			Class:          req.class,
			ConversationID: req.conversationID,
			Turn:           req.turn,
			Scheduled:      due,
			PromptWords:    req.promptWords(),
			MaxTokens:      req.maxTokens,
		}
		mu.Lock()
		results = append(results, res)
		mu.Unlock()
		if cnt.inFlight.Load() >= int64(c.MaxInFlight) {
			cnt.dropped.Add(1)
			mu.Lock()
			results[i].Outcome = OutcomeDropped
			mu.Unlock()
			continue
		}
		cnt.inFlight.Add(1)
		cnt.sent.Add(1)
		wg.Go(func() {
			send(ctx, client, endpoint, c.Model, req, &res)
			cnt.inFlight.Add(-1)
			if res.Outcome == exporter.OutcomeCompleted {
				cnt.completed.Add(1)
			} else {
				cnt.failed.Add(1)
			}
			mu.Lock()
			results[res.Index] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	stopProgress()
	return Summarize(results), results, nil
}

func reportProgress(progress func(Progress), start time.Time, cnt *counters) (stop func()) {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				progress(cnt.snapshot(time.Since(start)))
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		progress(cnt.snapshot(time.Since(start)))
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type chatRequest struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens int `json:"max_tokens"`
}

// send performs one streaming request and fills in res.
func send(ctx context.Context, client *http.Client, endpoint, model string, req request, res *Result) {
	body := chatRequest{Model: model, Messages: req.messages, Stream: true, MaxTokens: req.maxTokens}
	body.StreamOptions.IncludeUsage = true
	b, _ := json.Marshal(body)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(b))
	if err != nil {
		res.Outcome, res.Error = exporter.OutcomeError, err.Error()
		return
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	hr.Header.Set(HeaderClass, req.class)
	hr.Header.Set(HeaderConversationID, req.conversationID)
	res.Sent = time.Now()
	resp, err := client.Do(hr)
	if err != nil {
		res.DurationSeconds = time.Since(res.Sent).Seconds()
		res.Outcome, res.Error = failure(ctx, err), err.Error()
		return
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		res.DurationSeconds = time.Since(res.Sent).Seconds()
		res.Outcome, res.Error = exporter.OutcomeError, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return
	}
	done, err := readStream(resp.Body, res)
	res.DurationSeconds = time.Since(res.Sent).Seconds()
	switch {
	case err != nil:
		res.Outcome, res.Error = failure(ctx, err), err.Error()
		if res.Outcome == exporter.OutcomeError {
			res.Outcome = exporter.OutcomeIncomplete
		}
	case !done:
		res.Outcome, res.Error = exporter.OutcomeIncomplete, "stream ended without [DONE]"
	default:
		res.Outcome = exporter.OutcomeCompleted
	}
}

func failure(ctx context.Context, err error) string {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return exporter.OutcomeCanceled
	}
	return exporter.OutcomeError
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			Reasoning        string          `json:"reasoning"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func (c *chunk) hasOutput() bool {
	for _, ch := range c.Choices {
		d := ch.Delta
		if d.Content != "" || d.ReasoningContent != "" || d.Reasoning != "" || (len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null") {
			return true
		}
	}
	return false
}

// readStream consumes an SSE chat stream, stamping each line when it is
// read, before decoding. It reports whether [DONE] arrived. It is a reader
// of its own on purpose, not proxy/sse's meter: the client-side timings are
// an independent measurement to check tandem's against.
func readStream(body io.Reader, res *Result) (done bool, err error) {
	r := bufio.NewReaderSize(body, 64<<10)
	frames := 0
	usage := false
	for {
		line, err := r.ReadBytes('\n')
		at := time.Now()
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			data = bytes.TrimSpace(data)
			if string(data) == "[DONE]" {
				done = true
			} else {
				var c chunk
				if json.Unmarshal(data, &c) == nil {
					if c.hasOutput() {
						elapsed := at.Sub(res.Sent).Seconds()
						if !res.FirstToken {
							res.FirstToken, res.TTFTSeconds = true, elapsed
						}
						res.LastTokenSeconds = elapsed
						frames++
					}
					if c.Usage != nil {
						usage = true
						res.OutputTokens = c.Usage.CompletionTokens
						res.PromptTokens = c.Usage.PromptTokens
						if c.Usage.PromptTokensDetails != nil {
							res.CachedPromptTokens = c.Usage.PromptTokensDetails.CachedTokens
						}
					}
				}
			}
		}
		if err != nil {
			if !usage {
				res.OutputTokens, res.TokensEstimated = frames, true
			}
			if err == io.EOF {
				return done, nil
			}
			return done, err
		}
	}
}
