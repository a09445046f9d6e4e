package bench

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func defaults() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("bench", flag.ContinueOnError))
	return c
}

func TestValidate(t *testing.T) {
	if err := defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Rounds = 0 }, "--rounds must be at least 1, got 0"},
		{func(c *Config) { c.Requests = -3 }, "--requests must be at least 1, got -3"},
		{func(c *Config) { c.Frames = 0 }, "--frames must be at least 1, got 0"},
		{func(c *Config) { c.Frames = 100001 }, "--frames must be at most 100000, got 100001"},
		{func(c *Config) { c.Streams = nil }, "--streams must list at least one number of streams"},
		{func(c *Config) { c.Streams = []int{1000, 0} }, "--streams must be between 1 and 100000, got 0"},
	} {
		cfg := defaults()
		c.change(&cfg)
		err := cfg.Validate()
		if err == nil || err.Error() != c.want {
			t.Errorf("Validate() = %v, want %q", err, c.want)
		}
	}
}

func TestCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "go run ./cmd/tandem bench"},
		{[]string{"--quick"}, "go run ./cmd/tandem bench --quick"},
		{[]string{"--rounds", "2", "--frames", "50"}, "go run ./cmd/tandem bench --rounds 2 --frames 50"},
		{[]string{"--requests", "9", "--nginx", ""}, "go run ./cmd/tandem bench --requests 9 --nginx ''"},
		{[]string{"--streams", "1000, 4500"}, "go run ./cmd/tandem bench --streams 1000,4500"},
	} {
		var cfg Config
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := cfg.command(); got != c.want {
			t.Errorf("%q: command() = %q, want %q", c.args, got, c.want)
		}
	}

	// The tandem command runs its own executable by default.
	for _, c := range []struct{ tandem, want string }{
		{"/opt/tandem", "go run ./cmd/tandem bench"},
		{"/tmp/other", "go run ./cmd/tandem bench --tandem '/tmp/other'"},
		{"", "go run ./cmd/tandem bench --tandem ''"},
	} {
		cfg := defaults()
		cfg.Tandem, cfg.DefaultTandem = c.tandem, "/opt/tandem"
		if got := cfg.command(); got != c.want {
			t.Errorf("--tandem %q: command() = %q, want %q", c.tandem, got, c.want)
		}
	}
}

func TestPlanQuick(t *testing.T) {
	c := defaults()
	full, quick := c.plan(), func() plan { c.Quick = true; return c.plan() }()
	if quick.rounds >= full.rounds && quick.requests >= full.requests {
		t.Errorf("quick plan %+v is not smaller than the full plan %+v", quick, full)
	}
	if len(quick.streams) == 0 || quick.streams[len(quick.streams)-1] < 100 {
		t.Errorf("quick plan holds %v streams, want a run of at least 100", quick.streams)
	}
	if full.streams[len(full.streams)-1] != 5000 {
		t.Errorf("full plan holds %v streams, want up to 5000", full.streams)
	}
}

func TestStreamsFlag(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--streams", "10,x"}); err == nil || !strings.Contains(err.Error(), `"x" is not a number of streams`) {
		t.Errorf("--streams 10,x: %v", err)
	}
	if err := fs.Parse([]string{"--streams", "300"}); err != nil || !slices.Equal(c.Streams, []int{300}) {
		t.Errorf("--streams 300: streams %v, error %v", c.Streams, err)
	}
}
