package loadgen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/loadgen"
	"github.com/kestrelops/tandem/cmd/internal/sim/inproc"
	"github.com/kestrelops/tandem/exporter"
)

func config() loadgen.Config {
	return loadgen.Config{
		Target:            "http://upstream",
		Model:             "m",
		Rate:              10,
		Arrivals:          loadgen.ArrivalsConstant,
		Requests:          5,
		Seed:              1,
		MaxInFlight:       1000,
		RepeatShare:       0.6,
		SharedPrompts:     3,
		SharedPrefixWords: 50,
		PromptWords:       40,
		TurnWords:         10,
		Turns:             3,
		OutputTokens:      5,
	}
}

// stalled is an upstream that never answers: it records when each request
// arrived and waits for the client to go away.
type stalled struct {
	mu       sync.Mutex
	arrivals []time.Time
}

func (s *stalled) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.arrivals = append(s.arrivals, time.Now())
	s.mu.Unlock()
	<-r.Context().Done()
	return nil, r.Context().Err()
}

func TestOpenLoopWhileUpstreamStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &stalled{}
		c := config()
		c.Client = &http.Client{Transport: up}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		summary, results, err := loadgen.Run(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed != time.Minute {
			t.Errorf("Run returned after %v, want when the context ended", elapsed)
		}
		var want []time.Time
		for i := range 5 {
			want = append(want, start.Add(time.Duration(i)*100*time.Millisecond))
		}
		if !slices.Equal(up.arrivals, want) {
			t.Errorf("upstream saw requests at %v, want %v", up.arrivals, want)
		}
		for i, r := range results {
			if !r.Scheduled.Equal(want[i]) || !r.Sent.Equal(want[i]) || r.Outcome != exporter.OutcomeCanceled {
				t.Errorf("result %d: scheduled %v sent %v outcome %s", i, r.Scheduled, r.Sent, r.Outcome)
			}
		}
		if summary.Mixed.Failed != 5 || summary.Mixed.Completed != 0 {
			t.Errorf("summary = %+v", summary.Mixed)
		}
	})
}

func TestPoissonArrivalsKeepSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &stalled{}
		c := config()
		c.Arrivals, c.Requests, c.Rate = loadgen.ArrivalsPoisson, 0, 50
		c.Duration = 2 * time.Second
		c.Client = &http.Client{Transport: up}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		_, results, err := loadgen.Run(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		var scheduled, gaps []time.Duration
		for i, r := range results {
			scheduled = append(scheduled, r.Scheduled.Sub(start))
			if !r.Sent.Equal(r.Scheduled) || !up.arrivals[i].Equal(r.Scheduled) {
				t.Errorf("request %d scheduled %v, sent %v, arrived %v", i, r.Scheduled, r.Sent, up.arrivals[i])
			}
			if i > 0 {
				gaps = append(gaps, scheduled[i]-scheduled[i-1])
			}
		}
		// 100 expected; a Poisson count is within 4 standard deviations.
		if n := len(results); n < 60 || n > 140 {
			t.Errorf("%d requests in 2s at 50/s", n)
		}
		if last := scheduled[len(scheduled)-1]; last >= 2*time.Second {
			t.Errorf("request scheduled at %v, after the duration", last)
		}
		if slices.Min(gaps) == slices.Max(gaps) {
			t.Errorf("Poisson gaps are all %v", gaps[0])
		}
	})
}

func TestMaxInFlightDropsInsteadOfDelaying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &stalled{}
		c := config()
		c.MaxInFlight = 2
		c.Client = &http.Client{Transport: up}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		summary, results, err := loadgen.Run(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		var outcomes []string
		for _, r := range results {
			outcomes = append(outcomes, r.Outcome)
		}
		want := []string{exporter.OutcomeCanceled, exporter.OutcomeCanceled, loadgen.OutcomeDropped, loadgen.OutcomeDropped, loadgen.OutcomeDropped}
		if !slices.Equal(outcomes, want) || len(up.arrivals) != 2 {
			t.Errorf("outcomes %v with %d sent, want %v", outcomes, len(up.arrivals), want)
		}
		if summary.Mixed.Dropped != 3 {
			t.Errorf("dropped = %d, want 3", summary.Mixed.Dropped)
		}
	})
}

// script is an upstream that streams the frames of its test case, each
// after its delay.
type script []struct {
	after time.Duration
	data  string
}

func (s script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, f := range s {
		time.Sleep(f.after)
		if f.data == "CUT" {
			panic(http.ErrAbortHandler)
		}
		fmt.Fprintf(w, "data: %s\n\n", f.data)
	}
}

const (
	role    = `{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`
	empty   = `{"choices":[{"index":0,"delta":{"content":""}}]}`
	hello   = `{"choices":[{"index":0,"delta":{"content":"hello"}}]}`
	world   = `{"choices":[{"index":0,"delta":{"content":" world"}}]}`
	reason  = `{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`
	finish  = `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`
	usage   = `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":32}}}`
	done    = `[DONE]`
	ms      = time.Millisecond
	noDelay = time.Duration(0)
)

func TestMeasurement(t *testing.T) {
	type frames = script
	for _, tc := range []struct {
		name     string
		upstream http.Handler
		want     loadgen.Result
	}{
		{
			name: "role and empty frames do not count",
			upstream: frames{{noDelay, role}, {20 * ms, empty}, {10 * ms, hello}, {10 * ms, world},
				{noDelay, finish}, {noDelay, usage}, {5 * ms, done}},
			want: loadgen.Result{Outcome: exporter.OutcomeCompleted, Status: 200, FirstToken: true,
				TTFTSeconds: 0.030, LastTokenSeconds: 0.040, DurationSeconds: 0.045,
				OutputTokens: 2, PromptTokens: 40, CachedPromptTokens: 32},
		},
		{
			name:     "reasoning counts as output",
			upstream: frames{{10 * ms, reason}, {10 * ms, hello}, {noDelay, done}},
			want: loadgen.Result{Outcome: exporter.OutcomeCompleted, Status: 200, FirstToken: true,
				TTFTSeconds: 0.010, LastTokenSeconds: 0.020, DurationSeconds: 0.020,
				OutputTokens: 2, TokensEstimated: true},
		},
		{
			name:     "cut stream",
			upstream: frames{{10 * ms, hello}, {10 * ms, "CUT"}},
			want: loadgen.Result{Outcome: exporter.OutcomeIncomplete, Status: 200, FirstToken: true,
				TTFTSeconds: 0.010, LastTokenSeconds: 0.010, DurationSeconds: 0.020,
				OutputTokens: 1, TokensEstimated: true, Error: "unexpected EOF"},
		},
		{
			name:     "stream ends without [DONE]",
			upstream: frames{{10 * ms, hello}},
			want: loadgen.Result{Outcome: exporter.OutcomeIncomplete, Status: 200, FirstToken: true,
				TTFTSeconds: 0.010, LastTokenSeconds: 0.010, DurationSeconds: 0.010,
				OutputTokens: 1, TokensEstimated: true, Error: "stream ended without [DONE]"},
		},
		{
			name: "error status",
			upstream: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(5 * ms)
				http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
			}),
			want: loadgen.Result{Outcome: exporter.OutcomeError, Status: 503, DurationSeconds: 0.005,
				Error: `HTTP 503: {"error":"overloaded"}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := config()
				c.Requests = 1
				c.Client = inproc.Client(tc.upstream)
				_, results, err := loadgen.Run(t.Context(), c, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := results[0]
				want := tc.want
				want.Index, want.Class, want.ConversationID, want.Turn = got.Index, got.Class, got.ConversationID, got.Turn
				want.Scheduled, want.Sent, want.PromptWords, want.MaxTokens = got.Scheduled, got.Sent, got.PromptWords, got.MaxTokens
				if got != want {
					t.Errorf("result\n got %+v\nwant %+v", got, want)
				}
			})
		})
	}
}

// recorder is an upstream that answers at once and keeps every request.
type recorder struct {
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	class, conversation string
	body                struct {
		Model         string            `json:"model"`
		Messages      []loadgen.Message `json:"messages"`
		Stream        bool              `json:"stream"`
		StreamOptions map[string]bool   `json:"stream_options"`
		MaxTokens     int               `json:"max_tokens"`
	}
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req recorded
	req.class = r.Header.Get(loadgen.HeaderClass)
	req.conversation = r.Header.Get(loadgen.HeaderConversationID)
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &req.body); err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rec.mu.Lock()
	rec.requests = append(rec.requests, req)
	rec.mu.Unlock()
	fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", hello, usage)
}

func record(t *testing.T, c loadgen.Config) (*recorder, []loadgen.Result) {
	t.Helper()
	rec := &recorder{}
	var results []loadgen.Result
	synctest.Test(t, func(t *testing.T) {
		c.Client = inproc.Client(rec)
		var err error
		_, results, err = loadgen.Run(t.Context(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
	})
	return rec, results
}

func TestRepeatShare(t *testing.T) {
	for _, share := range []float64{0, 0.3, 0.9} {
		c := config()
		c.Requests, c.Rate, c.RepeatShare = 1000, 1000, share
		rec, results := record(t, c)
		repeated := 0
		for i, r := range rec.requests {
			if r.class != results[i].Class && len(rec.requests) == len(results) {
				t.Fatalf("request %d has class header %q, result %q", i, r.class, results[i].Class)
			}
			if r.class == exporter.ClassRepeatedPrefix {
				repeated++
			}
		}
		// Within 4 binomial standard deviations of the share.
		mean := share * 1000
		tol := 4 * sqrt(1000*share*(1-share))
		if float64(repeated) < mean-tol || float64(repeated) > mean+tol {
			t.Errorf("share %v: %d of 1000 repeated, want %v ± %.0f", share, repeated, mean, tol)
		}
	}
}

func sqrt(x float64) float64 {
	r := x
	for range 50 {
		if r == 0 {
			return 0
		}
		r = (r + x/r) / 2
	}
	return r
}

func TestRequestsAndConversations(t *testing.T) {
	c := config()
	c.Requests, c.Rate = 300, 100
	rec, _ := record(t, c)
	byConversation := map[string][]recorded{}
	shared := map[string]bool{}
	for _, r := range rec.requests {
		b := r.body
		if b.Model != "m" || !b.Stream || !b.StreamOptions["include_usage"] || b.MaxTokens < 1 {
			t.Fatalf("request body %+v", b)
		}
		byConversation[r.conversation] = append(byConversation[r.conversation], r)
	}
	multiTurn := 0
	for id, turns := range byConversation {
		first := turns[0].body.Messages
		switch turns[0].class {
		case exporter.ClassFresh:
			if len(turns) != 1 || len(first) != 1 || first[0].Role != "user" {
				t.Errorf("fresh conversation %s: %d turns, first %d messages", id, len(turns), len(first))
			}
			continue
		case exporter.ClassRepeatedPrefix:
			if first[0].Role != "system" || len(first) != 2 {
				t.Errorf("conversation %s starts with %d messages, first %q", id, len(first), first[0].Role)
			}
			shared[first[0].Content] = true
		}
		if len(turns) > 1 {
			multiTurn++
		}
		for k := 1; k < len(turns); k++ {
			prev, cur := turns[k-1].body.Messages, turns[k].body.Messages
			if len(cur) != len(prev)+2 || !slices.Equal(cur[:len(prev)], prev) ||
				cur[len(prev)].Role != "assistant" || cur[len(prev)+1].Role != "user" {
				t.Errorf("conversation %s turn %d does not resend turn %d and its reply", id, k+1, k)
			}
		}
	}
	if len(shared) != c.SharedPrompts {
		t.Errorf("%d distinct system prompts, want %d", len(shared), c.SharedPrompts)
	}
	if multiTurn == 0 {
		t.Error("no conversation had more than one turn")
	}
}

func TestProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := config()
		c.Requests, c.Rate = 0, 0.7 // due at 0, 1.43 and 2.86s: never on a tick
		c.Duration = 3500 * time.Millisecond
		c.Client = &http.Client{Transport: &stalled{}}
		ctx, cancel := context.WithTimeout(t.Context(), 4500*time.Millisecond)
		defer cancel()
		var got []loadgen.Progress
		if _, _, err := loadgen.Run(ctx, c, func(p loadgen.Progress) { got = append(got, p) }); err != nil {
			t.Fatal(err)
		}
		want := []loadgen.Progress{
			{Elapsed: 1 * time.Second, Sent: 1, InFlight: 1},
			{Elapsed: 2 * time.Second, Sent: 2, InFlight: 2},
			{Elapsed: 3 * time.Second, Sent: 3, InFlight: 3},
			{Elapsed: 4 * time.Second, Sent: 3, InFlight: 3},
			{Elapsed: 4500 * time.Millisecond, Sent: 3, Failed: 3},
		}
		if !slices.Equal(got, want) {
			t.Errorf("progress\n got %+v\nwant %+v", got, want)
		}
	})
}
