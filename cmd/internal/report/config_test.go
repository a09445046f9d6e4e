package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/proxy/record"
)

func parseFlags(t *testing.T, args ...string) Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFlags(t *testing.T) {
	c := parseFlags(t)
	if c.Window != 30*time.Minute || c.Format != "text" || c.MinPairs != 200 || c.FailOnRegression {
		t.Errorf("defaults = %+v", c)
	}
	c = parseFlags(t, "--records", "a.jsonl,b.jsonl", "--records", "c.jsonl", "--format", "json", "--min-pairs", "50", "--fail-on-regression")
	if !slices.Equal(c.Records, []string{"a.jsonl", "b.jsonl", "c.jsonl"}) || c.Format != "json" || c.MinPairs != 50 || !c.FailOnRegression {
		t.Errorf("parsed = %+v", c)
	}
}

func TestValidate(t *testing.T) {
	valid := Config{Prometheus: "http://localhost:9090", Window: time.Hour, Format: "text", MinPairs: 200}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Prometheus = "" }, "--prometheus or --records: one source is required"},
		{func(c *Config) { c.Records = []string{"r.jsonl"} }, "--prometheus and --records: choose one source"},
		{func(c *Config) { c.Prometheus = "localhost:9090" }, `--prometheus: "localhost:9090" is not an http or https URL`},
		{func(c *Config) { c.Window = 0 }, "--window: must be positive, got 0s"},
		{func(c *Config) { c.End = "yesterday" }, `--end: "yesterday" is neither RFC 3339 nor Unix seconds`},
		{func(c *Config) { c.End = "NaN" }, `--end: "NaN" is neither RFC 3339 nor Unix seconds`},
		{func(c *Config) { c.End = "1e300" }, `--end: "1e300" is neither RFC 3339 nor Unix seconds`},
		{func(c *Config) { c.Prometheus, c.Records, c.End = "", []string{"r.jsonl"}, "1700000000" }, "--end: applies to --prometheus only"},
		{func(c *Config) { c.Prometheus, c.Records, c.Experiment.Job = "", []string{"r.jsonl"}, "tandem" }, "--job, --namespace, --experiment: apply to --prometheus only"},
		{func(c *Config) { c.Format = "xml" }, `--format: "xml" is not one of text, markdown, json`},
		{func(c *Config) { c.MinPairs = 0 }, "--min-pairs: must be at least 1, got 0"},
		{func(c *Config) { c.Margin = 1 }, "--margin: must be at least 0 and below 1, got 1"},
	} {
		c := valid
		tc.edit(&c)
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}

func writeRecords(t *testing.T, recs []record.Record) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "records.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRun(t *testing.T) {
	path := writeRecords(t, seedRecords())
	_, promURL := fakePrometheus(t, seedPrometheus())
	end := strconv.FormatInt(promEnd.Unix(), 10)
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
		wantOut  string
		wantGate string
	}{
		{"records text", []string{"--records", path}, ExitOK, "", "fresh: B raised the system output rate", ""},
		{"records json gated", []string{"--records", path, "--format", "json", "--fail-on-regression"}, ExitRegression,
			"B regressed against A: fresh TTFT p95 slower (B 320 ms vs A 240 ms, +33.3% [", `"ttft_p95_verdict": "slower"`, ""},
		{"records markdown, no class has enough pairs", []string{"--records", path, "--format", "markdown", "--min-pairs", "1000", "--fail-on-regression"}, ExitOK, "", "## Decision",
			"gate passed: no class or the mix has B's TTFT p95 slower or its output rate lower"},
		{"no class has enough pairs, evidence required", []string{"--records", path, "--min-pairs", "1000", "--fail-on-regression", "--require-evidence"}, ExitNoEvidence,
			"not enough evidence to judge: fresh TTFT p95 insufficient_data (B 320 ms vs A 240 ms, +33.3% [+32.9%, +33.9%], 400 pairs); fresh output rate insufficient_data", "", ""},
		{"mix unjudged, evidence required", []string{"--records", path, "--require-evidence"}, ExitNoEvidence,
			"not enough evidence to judge: mixed TTFT p95 invalid", "", ""},
		{"prometheus gated", []string{"--prometheus", promURL, "--end", end, "--fail-on-regression"}, ExitRegression, ErrRegressed.Error(), "tandem report from prometheus", ""},
		{"margin", []string{"--records", path, "--margin", "0.5", "--format", "json"}, ExitOK, "", `"ttft_p95_verdict": "equivalent"`, ""},
		{"invalid", []string{"--format", "xml", "--records", path}, ExitUsage, `--format: "xml" is not one of text, markdown, json`, "", ""},
		{"missing file", []string{"--records", filepath.Join(t.TempDir(), "none.jsonl")}, ExitError, "no such file", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code, gate, err := Run(context.Background(), parseFlags(t, tc.args...), &out)
			if gate != tc.wantGate {
				t.Errorf("gate = %q, want %q", gate, tc.wantGate)
			}
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (err %v)", code, tc.wantCode, err)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.wantCode == ExitRegression && !errors.Is(err, ErrRegressed) {
				t.Errorf("err = %v, want ErrRegressed", err)
			}
			if tc.wantCode == ExitNoEvidence && !errors.Is(err, ErrNoEvidence) {
				t.Errorf("err = %v, want ErrNoEvidence", err)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("err %q is more than one line", err)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output does not contain %q:\n%s", tc.wantOut, out.String())
			}
		})
	}
}

// A crash's partial line and an overlong line are skipped, and every format
// says so.
func TestRunSkipsCorruptLines(t *testing.T) {
	path := writeRecords(t, seedRecords())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := bytes.Cut(b, []byte("\n"))
	torn := slices.Concat(first, []byte("\n"+`{"time":"2026-11-02T09:00:00Z","con`+"\n"), rest, bytes.Repeat([]byte("x"), 2<<20))
	if err := os.WriteFile(path, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	want := "2 corrupt or overlong record lines skipped (first at " + path + ":2)"
	for _, format := range []string{"text", "markdown", "json"} {
		var out bytes.Buffer
		code, _, err := Run(context.Background(), parseFlags(t, "--records", path, "--format", format), &out)
		if code != ExitOK || err != nil {
			t.Fatalf("%s: exit code %d, %v", format, code, err)
		}
		if format == "json" {
			var j jsonReport
			if err := json.Unmarshal(out.Bytes(), &j); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(j.Validity.Warnings, want) {
				t.Errorf("json warnings %q lack %q", j.Validity.Warnings, want)
			}
			continue
		}
		wantContains(t, format, out.String(), want, "fresh: B raised the system output rate")
	}
}

func TestRunWithOnlyCorruptLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	if err := os.WriteFile(path, []byte(`{"time":`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, err := Run(context.Background(), parseFlags(t, "--records", path), io.Discard)
	if want := "no records; 1 corrupt or overlong record line skipped (first at " + path + ":1)"; code != ExitError || err == nil || err.Error() != want {
		t.Fatalf("exit code %d, %v; want %q", code, err, want)
	}
}
