// Package sim is an OpenAI-compatible inference engine simulator: it serves
// /v1/chat/completions, /v1/completions and /v1/responses (streaming and not)
// with made-up text, timed by a model of a continuous-batching engine with a
// prefix cache.
//
// Tokens are whitespace-delimited words: a prompt's tokens are the words of
// its text (each chat message adds one more for its role), and every output
// token is one word. A request's output text and length depend only on the
// server's seed and the request (prompt and token limit), never on what else
// runs at the same time. With a token limit (max_tokens,
// max_completion_tokens or max_output_tokens) the output has exactly that
// many tokens, as a benchmark run with ignore_eos; without one its length is
// drawn from a lognormal distribution with mean Params.OutputMean.
//
// The time model: a request waits first in first out until fewer than
// MaxNumSeqs sequences are admitted. On admission its prefill starts and
// runs on its own, in parallel with decoding and with other prefills (as if
// chunked prefill overlapped perfectly): PrefillOverhead plus
// PrefillPerToken for each prompt token not found in the prefix cache. One
// scheduler loop runs decode steps back to back; a step lasts StepBase plus
// StepPerSeq for each sequence in it and gives each of them one token at its
// end. A sequence joins the first step that starts after its prefill ends,
// so its first token arrives after its queue wait, its prefill, the rest of
// the step in progress and one step; a larger batch slows every step.
//
// The prefix cache holds chained hashes of BlockSize-token blocks, up to
// PrefixCacheBlocks blocks, evicting the least recently used; a prompt's
// leading blocks found there are not prefilled and are reported as
// cached_tokens. Two simplifications flatter the cache a little: a prompt's
// blocks count as cached from its admission, before its prefill ends, and a
// block in use by a running sequence may be evicted.
package sim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Params are the knobs of the simulated engine.
type Params struct {
	// Model is the name /v1/models lists. Requests may name any model; it
	// is echoed.
	Model string
	// PrefillOverhead is the fixed cost of prefilling one sequence.
	PrefillOverhead time.Duration
	// PrefillPerToken is the cost of each prompt token not in the prefix
	// cache.
	PrefillPerToken time.Duration
	// StepBase is the fixed cost of one decode step.
	StepBase time.Duration
	// StepPerSeq is the added cost of one decode step per running sequence.
	StepPerSeq time.Duration
	// MaxNumSeqs is the most sequences running at once; others queue.
	MaxNumSeqs int
	// PrefixCacheBlocks is the prefix cache's capacity in blocks; 0
	// disables the cache.
	PrefixCacheBlocks int
	// BlockSize is the number of tokens in one cache block.
	BlockSize int
	// OutputMean and OutputSpread are the mean and the sigma of the
	// lognormal output length of requests without a token limit.
	OutputMean   int
	OutputSpread float64
	// ErrorRate is the fraction of requests answered with HTTP 500.
	ErrorRate float64
	// HangRate is the fraction of requests that are accepted and never
	// answered until the client goes away.
	HangRate float64
	// CutRate is the fraction of streams cut mid-way: the connection is
	// closed without the end of the stream.
	CutRate float64
}

// Profiles returns the named presets. "production" is a sane engine; "a"
// and "b" are the demo's two candidates: B has a prefix cache and faster
// decode but a slower fresh prefill than A, so B's time to first token is
// worse than A's on fresh prompts and better on repeated prefixes, and B
// streams faster on both. Under the loadgen defaults (9 requests/s, 60%
// reusing a 1200-word prefix) both keep up, with TTFT p95 around 150-250ms
// and decode around 45 (A) and 26 (B) ms/token; TestDemoProfiles pins the
// directions.
func Profiles() map[string]Params {
	base := Params{
		Model:             "tandem-sim",
		PrefillOverhead:   8 * time.Millisecond,
		PrefillPerToken:   40 * time.Microsecond,
		StepBase:          25 * time.Millisecond,
		StepPerSeq:        150 * time.Microsecond,
		MaxNumSeqs:        128,
		PrefixCacheBlocks: 8192,
		BlockSize:         16,
		OutputMean:        150,
		OutputSpread:      0.4,
	}
	a := base
	a.PrefillOverhead = 10 * time.Millisecond
	a.PrefillPerToken = 60 * time.Microsecond
	a.PrefixCacheBlocks = 0
	a.StepBase = 35 * time.Millisecond
	a.StepPerSeq = 200 * time.Microsecond
	b := base
	b.PrefillOverhead = 10 * time.Millisecond
	b.PrefillPerToken = 130 * time.Microsecond
	b.StepBase = 22 * time.Millisecond
	b.StepPerSeq = 120 * time.Microsecond
	return map[string]Params{"production": base, "a": a, "b": b}
}

// Validate reports the first invalid parameter, named by its flag.
func (p Params) Validate() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"prefill-overhead", p.PrefillOverhead},
		{"prefill-per-token", p.PrefillPerToken},
		{"step-base", p.StepBase},
		{"step-per-seq", p.StepPerSeq},
	} {
		if d.v < 0 {
			return fmt.Errorf("--%s must not be negative, got %s", d.flag, d.v)
		}
	}
	if p.StepBase+p.StepPerSeq <= 0 {
		return fmt.Errorf("--step-base and --step-per-seq must not both be zero")
	}
	if p.MaxNumSeqs < 1 {
		return fmt.Errorf("--max-num-seqs must be at least 1, got %d", p.MaxNumSeqs)
	}
	if p.PrefixCacheBlocks < 0 {
		return fmt.Errorf("--prefix-cache-blocks must not be negative, got %d", p.PrefixCacheBlocks)
	}
	if p.BlockSize < 1 {
		return fmt.Errorf("--block-size must be at least 1, got %d", p.BlockSize)
	}
	if p.OutputMean < 1 {
		return fmt.Errorf("--output-mean must be at least 1, got %d", p.OutputMean)
	}
	if p.OutputSpread < 0 {
		return fmt.Errorf("--output-spread must not be negative, got %g", p.OutputSpread)
	}
	for _, r := range []struct {
		flag string
		v    float64
	}{{"error-rate", p.ErrorRate}, {"hang-rate", p.HangRate}, {"cut-rate", p.CutRate}} {
		if r.v < 0 || r.v > 1 {
			return fmt.Errorf("--%s must be between 0 and 1, got %g", r.flag, r.v)
		}
	}
	if p.ErrorRate+p.HangRate > 1 {
		return fmt.Errorf("--error-rate plus --hang-rate must not exceed 1, got %g", p.ErrorRate+p.HangRate)
	}
	return nil
}

// Server is the simulator's HTTP handler. Its scheduler goroutine runs
// until Close.
type Server struct {
	p       Params
	seed    int64
	engine  *engine
	mux     *http.ServeMux
	ids     atomic.Uint64
	faultMu sync.Mutex
	faults  *rand.Rand
}

// New starts a simulator with parameters p; seed fixes output text, output
// lengths and which requests get faults. p must be valid (see Validate).
func New(p Params, seed int64) *Server {
	s := &Server{
		p:      p,
		seed:   seed,
		engine: newEngine(p),
		faults: rand.New(rand.NewPCG(uint64(seed), 0x6661756c7473)),
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("POST /v1/chat/completions", s.generate(apiChat))
	s.mux.HandleFunc("POST /v1/completions", s.generate(apiCompletions))
	s.mux.HandleFunc("POST /v1/responses", s.generate(apiResponses))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found_error", "no route for "+r.Method+" "+r.URL.Path)
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the scheduler; requests still in the engine end at once.
func (s *Server) Close() { s.engine.close() }

type fault int

const (
	faultNone fault = iota
	faultError
	faultHang
	faultCut
)

func (s *Server) drawFault(stream bool) fault {
	if s.p.ErrorRate == 0 && s.p.HangRate == 0 && s.p.CutRate == 0 {
		return faultNone
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	u := s.faults.Float64()
	switch {
	case u < s.p.ErrorRate:
		return faultError
	case u < s.p.ErrorRate+s.p.HangRate:
		return faultHang
	case stream && s.faults.Float64() < s.p.CutRate:
		return faultCut
	}
	return faultNone
}
