package demo

import (
	"flag"
	"io"
	"testing"
)

func TestInvalidFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "0s"}, "--duration must be positive, got 0s"},
		{[]string{"--rate", "0"}, "--rate must be positive, got 0"},
		{[]string{"--rate", "NaN"}, "--rate must be positive, got NaN"},
		{[]string{"--rate", "Inf"}, "--rate must be finite, got +Inf"},
		{[]string{"--linger", "-1s"}, "--linger must not be negative, got -1s"},
		{[]string{"--repeat-share", "1.5"}, "--repeat-share must be between 0 and 1, got 1.5"},
		{[]string{"--repeat-share", "NaN"}, "--repeat-share must be between 0 and 1, got NaN"},
		{[]string{"--a-profile", "c"}, `--a-profile: unknown profile "c" (have a, b, production)`},
	} {
		var c Config
		fs := flag.NewFlagSet("demo", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	var c Config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil || c.Validate() != nil {
		t.Errorf("defaults invalid: %v, %v", err, c.Validate())
	}
}
