package sim_test

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/sim"
)

func parse(t *testing.T, args ...string) (*sim.Config, error) {
	t.Helper()
	var c sim.Config
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return &c, c.Validate()
}

func TestFlagsOverrideProfile(t *testing.T) {
	c, err := parse(t, "--profile", "b", "--max-num-seqs", "7", "--step-base", "3ms")
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Params()
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Profiles()["b"]
	want.MaxNumSeqs, want.StepBase = 7, 3*time.Millisecond
	if p != want {
		t.Errorf("params = %+v, want %+v", p, want)
	}
}

func TestProfilesAreValid(t *testing.T) {
	for _, name := range []string{"production", "a", "b"} {
		p, ok := sim.Profiles()[name]
		if !ok {
			t.Fatalf("no profile %q", name)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("profile %s: %v", name, err)
		}
	}
}

func TestInvalidFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "c"}, `--profile "c" is unknown; known: a, b, production`},
		{[]string{"--addr", ""}, "--addr must not be empty"},
		{[]string{"--max-num-seqs", "0"}, "--max-num-seqs must be at least 1, got 0"},
		{[]string{"--block-size", "0"}, "--block-size must be at least 1, got 0"},
		{[]string{"--prefix-cache-blocks", "-1"}, "--prefix-cache-blocks must not be negative, got -1"},
		{[]string{"--prefill-per-token", "-1ms"}, "--prefill-per-token must not be negative, got -1ms"},
		{[]string{"--step-base", "0s", "--step-per-seq", "0s"}, "--step-base and --step-per-seq must not both be zero"},
		{[]string{"--output-mean", "0"}, "--output-mean must be at least 1, got 0"},
		{[]string{"--output-spread", "-0.1"}, "--output-spread must not be negative, got -0.1"},
		{[]string{"--error-rate", "1.5"}, "--error-rate must be between 0 and 1, got 1.5"},
		{[]string{"--cut-rate", "-1"}, "--cut-rate must be between 0 and 1, got -1"},
		{[]string{"--error-rate", "0.6", "--hang-rate", "0.6"}, "--error-rate plus --hang-rate must not exceed 1, got 1.2"},
		{[]string{"--step-base", "soon"}, `invalid value "soon" for flag -step-base: not a duration`},
		{[]string{"--max-num-seqs", "many"}, `invalid value "many" for flag -max-num-seqs: not an integer`},
		{[]string{"--error-rate", "NaN"}, `invalid value "NaN" for flag -error-rate: not a finite number`},
		{[]string{"--output-spread", "Inf"}, `invalid value "Inf" for flag -output-spread: not a finite number`},
		{[]string{"--cut-rate", "often"}, `invalid value "often" for flag -cut-rate: not a finite number`},
	} {
		_, err := parse(t, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
