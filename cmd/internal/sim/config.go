package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the configuration of the sim subcommand: a profile, and flags
// that override single parameters of it.
type Config struct {
	Addr    string
	Profile string
	Seed    int64
	// overrides apply, in flag order, the parameters set on the command
	// line on top of the profile.
	overrides []func(*Params)
}

// RegisterFlags defines the sim subcommand's flags on fs. Parameter flags
// left unset keep the profile's value.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", ":8000", "address to listen on")
	fs.StringVar(&c.Profile, "profile", "production", "engine preset: "+strings.Join(ProfileNames(), ", "))
	fs.Int64Var(&c.Seed, "seed", 1, "seed of output text, output lengths and faults")
	c.stringFlag(fs, "model", "model name listed by /v1/models", func(p *Params, v string) { p.Model = v })
	c.durationFlag(fs, "prefill-overhead", "fixed prefill cost per sequence", func(p *Params, v time.Duration) { p.PrefillOverhead = v })
	c.durationFlag(fs, "prefill-per-token", "prefill cost per uncached prompt token", func(p *Params, v time.Duration) { p.PrefillPerToken = v })
	c.durationFlag(fs, "step-base", "fixed cost of one decode step", func(p *Params, v time.Duration) { p.StepBase = v })
	c.durationFlag(fs, "step-per-seq", "added decode step cost per running sequence", func(p *Params, v time.Duration) { p.StepPerSeq = v })
	c.intFlag(fs, "max-num-seqs", "most sequences running at once; the rest queue", func(p *Params, v int) { p.MaxNumSeqs = v })
	c.intFlag(fs, "prefix-cache-blocks", "prefix cache capacity in blocks (0 disables it)", func(p *Params, v int) { p.PrefixCacheBlocks = v })
	c.intFlag(fs, "block-size", "tokens per prefix cache block", func(p *Params, v int) { p.BlockSize = v })
	c.intFlag(fs, "output-mean", "mean output tokens of requests without a token limit", func(p *Params, v int) { p.OutputMean = v })
	c.floatFlag(fs, "output-spread", "lognormal sigma of output tokens of requests without a token limit", func(p *Params, v float64) { p.OutputSpread = v })
	c.floatFlag(fs, "error-rate", "fraction of requests answered with HTTP 500", func(p *Params, v float64) { p.ErrorRate = v })
	c.floatFlag(fs, "hang-rate", "fraction of requests never answered until the client goes away", func(p *Params, v float64) { p.HangRate = v })
	c.floatFlag(fs, "cut-rate", "fraction of streams cut mid-way without their end", func(p *Params, v float64) { p.CutRate = v })
}

func (c *Config) stringFlag(fs *flag.FlagSet, name, usage string, set func(*Params, string)) {
	fs.Func(name, usage+" (default: from --profile)", func(s string) error {
		c.overrides = append(c.overrides, func(p *Params) { set(p, s) })
		return nil
	})
}

func (c *Config) durationFlag(fs *flag.FlagSet, name, usage string, set func(*Params, time.Duration)) {
	fs.Func(name, usage+" (default: from --profile)", func(s string) error {
		v, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("not a duration")
		}
		c.overrides = append(c.overrides, func(p *Params) { set(p, v) })
		return nil
	})
}

func (c *Config) intFlag(fs *flag.FlagSet, name, usage string, set func(*Params, int)) {
	fs.Func(name, usage+" (default: from --profile)", func(s string) error {
		v, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("not an integer")
		}
		c.overrides = append(c.overrides, func(p *Params) { set(p, v) })
		return nil
	})
}

func (c *Config) floatFlag(fs *flag.FlagSet, name, usage string, set func(*Params, float64)) {
	fs.Func(name, usage+" (default: from --profile)", func(s string) error {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("not a finite number")
		}
		c.overrides = append(c.overrides, func(p *Params) { set(p, v) })
		return nil
	})
}

// ProfileNames lists the names of Profiles, sorted.
func ProfileNames() []string { return slices.Sorted(maps.Keys(Profiles())) }

// Params returns the profile's parameters with the flag overrides applied.
func (c *Config) Params() (Params, error) {
	p, ok := Profiles()[c.Profile]
	if !ok {
		return Params{}, fmt.Errorf("--profile %q is unknown; known: %s", c.Profile, strings.Join(ProfileNames(), ", "))
	}
	for _, o := range c.overrides {
		o(&p)
	}
	return p, nil
}

// Validate reports the first invalid flag.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("--addr must not be empty")
	}
	p, err := c.Params()
	if err != nil {
		return err
	}
	return p.Validate()
}

// Serve runs the simulator on c.Addr until ctx ends, then shuts down.
func Serve(ctx context.Context, c Config, logger *slog.Logger) error {
	if err := c.Validate(); err != nil {
		return err
	}
	p, _ := c.Params()
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	sim := New(p, c.Seed)
	defer sim.Close()
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("engine simulator listening", "addr", ln.Addr().String(), "profile", c.Profile, "seed", c.Seed)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	return nil
}
