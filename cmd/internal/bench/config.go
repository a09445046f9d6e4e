// Package bench measures what tandem adds to a streamed request, against a
// direct connection and against nginx: time to first token, relay
// throughput, CPU per request and memory per in-flight stream. Every variant
// runs in the same process run, interleaved round by round, in front of the
// benchmark's own zero-think-time streaming upstream.
package bench

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultNginx is where Debian installs nginx.
const DefaultNginx = "/usr/sbin/nginx"

// Config is the configuration of tandem bench.
type Config struct {
	// Rounds is the number of rounds; each round runs every variant once
	// per concurrency level, in an order rotated from round to round.
	Rounds int
	// Requests is the number of requests per variant, concurrency level and
	// round.
	Requests int
	// Frames is the number of content frames in every stream.
	Frames int
	// Streams are the numbers of streams held in flight at once in the
	// memory phase, one measurement each.
	Streams []int
	// Quick replaces Rounds, Requests, Frames and Streams by a small
	// configuration for a smoke run.
	Quick bool
	// Nginx is the nginx binary; empty leaves nginx out.
	Nginx string
	// Tandem, when set, is a tandem binary: tandem then runs as "Tandem
	// serve" in a process of its own, measured from /proc like nginx,
	// instead of in this process.
	Tandem string
	// DefaultTandem is the value of Tandem when --tandem is not given (the
	// running executable, for the tandem command); the reproducing command
	// names --tandem only when it differs.
	DefaultTandem string
}

// RegisterFlags defines the bench subcommand's flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Rounds, "rounds", 6, "rounds; each runs every variant once per concurrency level")
	fs.IntVar(&c.Requests, "requests", 400, "requests per variant, concurrency level and round")
	fs.IntVar(&c.Frames, "frames", 100, "content frames per stream")
	c.Streams = []int{1000, 5000}
	fs.Func("streams", "comma-separated numbers of streams held in flight at once for the memory measurement (default 1000,5000)", func(s string) error {
		streams, err := parseStreams(s)
		if err != nil {
			return err
		}
		c.Streams = streams
		return nil
	})
	fs.BoolVar(&c.Quick, "quick", false, "small configuration for a smoke run (overrides --rounds, --requests, --frames and --streams)")
	fs.StringVar(&c.Nginx, "nginx", DefaultNginx, "nginx binary to compare with; empty leaves nginx out")
	fs.StringVar(&c.Tandem, "tandem", "", "tandem binary to run as a separate process (measured from /proc like nginx); empty runs tandem in this process")
}

// Validate names the first bad flag.
func (c Config) Validate() error {
	switch {
	case c.Rounds < 1:
		return fmt.Errorf("--rounds must be at least 1, got %d", c.Rounds)
	case c.Requests < 1:
		return fmt.Errorf("--requests must be at least 1, got %d", c.Requests)
	case c.Frames < 1:
		return fmt.Errorf("--frames must be at least 1, got %d", c.Frames)
	case c.Frames > 100000:
		return fmt.Errorf("--frames must be at most 100000, got %d", c.Frames)
	case len(c.Streams) == 0:
		return errors.New("--streams must list at least one number of streams")
	}
	for _, n := range c.Streams {
		if n < 1 || n > maxStreams {
			return fmt.Errorf("--streams must be between 1 and %d, got %d", maxStreams, n)
		}
	}
	return nil
}

// maxStreams bounds the streams held in flight at once.
const maxStreams = 100000

// parseStreams reads a comma-separated list of stream counts.
func parseStreams(s string) ([]int, error) {
	var streams []int
	for field := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number of streams", field)
		}
		streams = append(streams, n)
	}
	return streams, nil
}

// Concurrency levels of the latency and throughput phases: one stream at a
// time, and enough streams to saturate the proxy.
var concurrencies = []int{1, 64}

// plan is a validated Config with Quick applied.
type plan struct {
	rounds, requests, frames int
	streams                  []int // in-flight stream counts of the memory phase
	nginx                    string
}

func (c Config) plan() plan {
	if c.Quick {
		return plan{rounds: 2, requests: 64, frames: 20, streams: []int{50, 200}, nginx: c.Nginx}
	}
	return plan{rounds: c.Rounds, requests: c.Requests, frames: c.Frames, streams: c.Streams, nginx: c.Nginx}
}

// command is the tandem command line that reproduces c.
func (c Config) command() string {
	args := []string{"go run ./cmd/tandem bench"}
	if c.Quick {
		args = append(args, "--quick")
	} else {
		var d Config
		d.RegisterFlags(flag.NewFlagSet("", flag.ContinueOnError))
		if c.Rounds != d.Rounds {
			args = append(args, fmt.Sprintf("--rounds %d", c.Rounds))
		}
		if c.Requests != d.Requests {
			args = append(args, fmt.Sprintf("--requests %d", c.Requests))
		}
		if c.Frames != d.Frames {
			args = append(args, fmt.Sprintf("--frames %d", c.Frames))
		}
		if !slices.Equal(c.Streams, d.Streams) {
			counts := make([]string, len(c.Streams))
			for i, n := range c.Streams {
				counts[i] = strconv.Itoa(n)
			}
			args = append(args, "--streams "+strings.Join(counts, ","))
		}
	}
	if c.Nginx != DefaultNginx {
		args = append(args, fmt.Sprintf("--nginx '%s'", c.Nginx))
	}
	if c.Tandem != c.DefaultTandem {
		args = append(args, fmt.Sprintf("--tandem '%s'", c.Tandem))
	}
	return strings.Join(args, " ")
}
