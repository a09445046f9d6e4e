// Package loadgen is an open-loop load generator for OpenAI-compatible chat
// endpoints: requests leave on a schedule fixed in advance (Poisson or
// constant rate), each in its own goroutine, never waiting for earlier
// responses, so queueing delay upstream shows in the timings instead of
// slowing the load down.
package loadgen

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"
)

// Arrival processes.
const (
	ArrivalsPoisson  = "poisson"
	ArrivalsConstant = "constant"
)

// Config is the configuration of one load run.
type Config struct {
	// Target is the base URL; requests go to Target/v1/chat/completions.
	Target string
	Model  string
	// Rate is the mean number of requests sent per second.
	Rate float64
	// Arrivals is ArrivalsPoisson or ArrivalsConstant.
	Arrivals string
	// Duration and Requests stop the schedule, whichever comes first; zero
	// means no limit, but one of them must be set.
	Duration time.Duration
	Requests int
	Seed     int64
	// MaxInFlight caps requests awaiting their response; a request due
	// while the cap is reached is dropped, not delayed.
	MaxInFlight int
	// RepeatShare is the fraction of requests that reuse a prefix: a
	// shared system prompt or an earlier turn of a conversation.
	RepeatShare float64
	// SharedPrompts is the number of shared system prompts, each of
	// SharedPrefixWords words.
	SharedPrompts     int
	SharedPrefixWords int
	// PromptWords is the mean length of a fresh prompt, TurnWords the mean
	// length of a user turn in a conversation.
	PromptWords int
	TurnWords   int
	// Turns is the mean number of turns of a conversation.
	Turns int
	// OutputTokens is the mean max_tokens of a request.
	OutputTokens int
	// Results, when set, is the file RunAndReport writes one JSON line per
	// request to.
	Results string
	// Client sends the requests; nil means a client without a timeout.
	Client *http.Client
}

// RegisterFlags defines the loadgen subcommand's flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Target, "target", "http://localhost:8080", "base URL of the OpenAI-compatible API")
	fs.StringVar(&c.Model, "model", "tandem-sim", "model name sent in every request")
	fs.Float64Var(&c.Rate, "rate", 9, "mean requests per second")
	fs.StringVar(&c.Arrivals, "arrivals", ArrivalsPoisson, "arrival process: poisson or constant")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "how long to send requests (0: until --requests)")
	fs.IntVar(&c.Requests, "requests", 0, "how many requests to send (0: until --duration)")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of arrivals and prompts")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", 512, "requests awaiting a response beyond which new ones are dropped")
	fs.Float64Var(&c.RepeatShare, "repeat-share", 0.6, "fraction of requests reusing a prefix (shared system prompt or earlier conversation turns)")
	fs.IntVar(&c.SharedPrompts, "shared-prompts", 3, "number of shared system prompts")
	fs.IntVar(&c.SharedPrefixWords, "shared-prefix-words", 1200, "words in each shared system prompt")
	fs.IntVar(&c.PromptWords, "prompt-words", 600, "mean words in a fresh prompt")
	fs.IntVar(&c.TurnWords, "turn-words", 100, "mean words in a user turn of a conversation")
	fs.IntVar(&c.Turns, "turns", 4, "mean turns of a conversation")
	fs.IntVar(&c.OutputTokens, "output-tokens", 150, "mean max_tokens per request")
	fs.StringVar(&c.Results, "results", "", "file to write one JSON line per request to")
}

// Validate reports the first invalid setting, named by its flag.
func (c *Config) Validate() error {
	u, err := url.Parse(c.Target)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("--target must be an http(s) base URL, got %q", c.Target)
	case c.Model == "":
		return errors.New("--model must not be empty")
	case !(c.Rate > 0):
		return fmt.Errorf("--rate must be positive, got %g", c.Rate)
	case math.IsInf(c.Rate, 1):
		return fmt.Errorf("--rate must be finite, got %g", c.Rate)
	case c.Arrivals != ArrivalsPoisson && c.Arrivals != ArrivalsConstant:
		return fmt.Errorf("--arrivals must be %s or %s, got %q", ArrivalsPoisson, ArrivalsConstant, c.Arrivals)
	case c.Duration < 0:
		return fmt.Errorf("--duration must not be negative, got %s", c.Duration)
	case c.Requests < 0:
		return fmt.Errorf("--requests must not be negative, got %d", c.Requests)
	case c.Duration == 0 && c.Requests == 0:
		return errors.New("--duration or --requests must be set")
	case c.MaxInFlight < 1:
		return fmt.Errorf("--max-in-flight must be at least 1, got %d", c.MaxInFlight)
	case !(c.RepeatShare >= 0 && c.RepeatShare <= 1):
		return fmt.Errorf("--repeat-share must be between 0 and 1, got %g", c.RepeatShare)
	case c.RepeatShare > 0 && c.SharedPrompts < 1:
		return fmt.Errorf("--shared-prompts must be at least 1 when --repeat-share is above 0, got %d", c.SharedPrompts)
	case c.SharedPrefixWords < 1:
		return fmt.Errorf("--shared-prefix-words must be at least 1, got %d", c.SharedPrefixWords)
	case c.PromptWords < 1:
		return fmt.Errorf("--prompt-words must be at least 1, got %d", c.PromptWords)
	case c.TurnWords < 1:
		return fmt.Errorf("--turn-words must be at least 1, got %d", c.TurnWords)
	case c.Turns < 1:
		return fmt.Errorf("--turns must be at least 1, got %d", c.Turns)
	case c.OutputTokens < 1:
		return fmt.Errorf("--output-tokens must be at least 1, got %d", c.OutputTokens)
	}
	return nil
}
