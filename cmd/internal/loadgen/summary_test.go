package loadgen_test

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/loadgen"
	"github.com/kestrelops/tandem/exporter"
)

func completed(class string, sent time.Time, ttft, last, duration float64, tokens int) loadgen.Result {
	return loadgen.Result{Class: class, Sent: sent, Outcome: exporter.OutcomeCompleted, FirstToken: true,
		TTFTSeconds: ttft, LastTokenSeconds: last, DurationSeconds: duration, OutputTokens: tokens}
}

func TestSummarize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fresh, repeated := exporter.ClassFresh, exporter.ClassRepeatedPrefix
	results := []loadgen.Result{
		completed(fresh, t0, 0.5, 1.5, 1.5, 11),
		completed(fresh, t0.Add(time.Second), 0.25, 0.75, 0.8, 6),
		completed(repeated, t0.Add(2*time.Second), 0.125, 2.125, 2.2, 21),
		completed(repeated, t0.Add(3*time.Second), 0.375, 1.375, 7, 11),
		{Class: repeated, Sent: t0.Add(4 * time.Second), Outcome: exporter.OutcomeError, DurationSeconds: 0.1},
		{Class: fresh, Outcome: loadgen.OutcomeDropped},
	}
	s := loadgen.Summarize(results)
	if s.Window != 10*time.Second {
		t.Errorf("window = %v, want 10s (first sent to last finished)", s.Window)
	}
	want := []loadgen.ClassSummary{
		{Class: fresh, Scheduled: 3, Dropped: 1, Completed: 2, TTFTP50: 0.25, TTFTP95: 0.5, TTFTP99: 0.5,
			OutputTokens: 17, OutputRate: 1.7, SpeedP50: 10},
		{Class: repeated, Scheduled: 3, Completed: 2, Failed: 1, TTFTP50: 0.125, TTFTP95: 0.375, TTFTP99: 0.375,
			OutputTokens: 32, OutputRate: 3.2, SpeedP50: 10},
	}
	if len(s.Classes) != 2 || s.Classes[0] != want[0] || s.Classes[1] != want[1] {
		t.Errorf("classes\n got %+v\nwant %+v", s.Classes, want)
	}
	// The mixed row comes from the merged timings, not from the class rows.
	mixed := loadgen.ClassSummary{Class: loadgen.ClassMixed, Scheduled: 6, Dropped: 1, Completed: 4, Failed: 1,
		TTFTP50: 0.25, TTFTP95: 0.5, TTFTP99: 0.5, OutputTokens: 49, OutputRate: 4.9, SpeedP50: 10}
	if s.Mixed != mixed {
		t.Errorf("mixed\n got %+v\nwant %+v", s.Mixed, mixed)
	}
}

func TestWriteText(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := loadgen.Summarize([]loadgen.Result{
		completed(exporter.ClassFresh, t0, 0.25, 1.25, 2, 11),
		{Class: exporter.ClassRepeatedPrefix, Sent: t0, Outcome: exporter.OutcomeError, DurationSeconds: 0.5},
	})
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `
            class  scheduled  dropped  completed  failed  TTFT p50 ms  TTFT p95 ms  TTFT p99 ms  output tok/s  speed p50 tok/s
            fresh          1        0          1       0        250.0        250.0        250.0           5.5             10.0
  repeated_prefix          1        0          0       1            -            -            -           0.0                -
            mixed          2        0          1       1        250.0        250.0        250.0           5.5             10.0
`
	var got []string
	for _, line := range strings.Split(b.String(), "\n") {
		got = append(got, strings.TrimRight(line, " "))
	}
	want += "window 2.0s, first request sent to last finished\n"
	if g := strings.Join(got, "\n"); "\n"+g != want {
		t.Errorf("table:\n%s\nwant:%s", g, want)
	}
}

func TestWriteResults(t *testing.T) {
	var b bytes.Buffer
	rs := []loadgen.Result{{Index: 0, Class: "fresh", Outcome: "completed"}, {Index: 1, Class: "fresh", Outcome: "dropped"}}
	if err := loadgen.WriteResults(&b, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"index":1`) || !strings.Contains(lines[1], `"outcome":"dropped"`) {
		t.Errorf("lines = %q", lines)
	}
}

func TestInvalidFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "localhost:8080"}, `--target must be an http(s) base URL, got "localhost:8080"`},
		{[]string{"--model", ""}, "--model must not be empty"},
		{[]string{"--rate", "0"}, "--rate must be positive, got 0"},
		{[]string{"--rate", "NaN"}, "--rate must be positive, got NaN"},
		{[]string{"--rate", "Inf"}, "--rate must be finite, got +Inf"},
		{[]string{"--arrivals", "bursty"}, `--arrivals must be poisson or constant, got "bursty"`},
		{[]string{"--duration", "-1s"}, "--duration must not be negative, got -1s"},
		{[]string{"--requests", "-1"}, "--requests must not be negative, got -1"},
		{[]string{"--duration", "0s"}, "--duration or --requests must be set"},
		{[]string{"--max-in-flight", "0"}, "--max-in-flight must be at least 1, got 0"},
		{[]string{"--repeat-share", "1.1"}, "--repeat-share must be between 0 and 1, got 1.1"},
		{[]string{"--repeat-share", "NaN"}, "--repeat-share must be between 0 and 1, got NaN"},
		{[]string{"--shared-prompts", "0"}, "--shared-prompts must be at least 1 when --repeat-share is above 0, got 0"},
		{[]string{"--shared-prefix-words", "0"}, "--shared-prefix-words must be at least 1, got 0"},
		{[]string{"--prompt-words", "0"}, "--prompt-words must be at least 1, got 0"},
		{[]string{"--turn-words", "0"}, "--turn-words must be at least 1, got 0"},
		{[]string{"--turns", "0"}, "--turns must be at least 1, got 0"},
		{[]string{"--output-tokens", "0"}, "--output-tokens must be at least 1, got 0"},
	} {
		var c loadgen.Config
		fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	var c loadgen.Config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil || c.Validate() != nil {
		t.Errorf("defaults invalid: %v, %v", err, c.Validate())
	}
}
