package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
)

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		stdout     string
		stderrPart string
	}{
		{args: nil, code: 2, stderrPart: "Usage: tandem COMMAND"},
		{args: []string{"help"}, code: 0, stderrPart: "demo "},
		{args: []string{"frobnicate"}, code: 2, stderrPart: `unknown command "frobnicate"`},
		{args: []string{"version"}, code: 0, stdout: "tandem dev\n"},
		{args: []string{"demo", "-h"}, code: 0, stderrPart: "-duration"},
		{args: []string{"dashboards", "-h"}, code: 0, stderrPart: "-out"},
		{args: []string{"demo", "--bogus"}, code: 2, stderrPart: "flag provided but not defined: -bogus"},
		{args: []string{"demo", "--rate", "0"}, code: 1, stderrPart: "--rate must be positive, got 0"},
		{args: []string{"demo", "extra"}, code: 2, stderrPart: `unexpected argument "extra"`},
		{args: []string{"dashboards"}, code: 1, stderrPart: "--out is required"},
		{args: []string{"rules"}, code: 1, stderrPart: "--out is required"},
		{args: []string{"serve", "-h"}, code: 0, stderrPart: "TANDEM_PRIMARY_URL"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("tandem %v: exit %d, want %d\nstderr: %s", tc.args, code, tc.code, stderr.String())
		}
		if tc.stdout != "" && stdout.String() != tc.stdout {
			t.Errorf("tandem %v: stdout %q, want %q", tc.args, stdout.String(), tc.stdout)
		}
		if !strings.Contains(stderr.String(), tc.stderrPart) {
			t.Errorf("tandem %v: stderr lacks %q:\n%s", tc.args, tc.stderrPart, stderr.String())
		}
	}
}

// The report's gate says in one line on stderr which class failed and why.
func TestReportGateOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	for i := range 20 {
		for _, config := range exporter.Arms {
			if err := enc.Encode(record.Record{Start: start.Add(time.Duration(i) * time.Second), Config: config, Class: exporter.ClassFresh,
				PairID: strconv.Itoa(i), Outcome: exporter.OutcomeCompleted, FirstToken: true, TTFTSeconds: 0.2, LastTokenSeconds: 2, DurationSeconds: 2, OutputTokens: 100}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--fail-on-regression"}, 0, "tandem report: gate passed: no class or the mix has B's TTFT p95 slower or its output rate lower\n"},
		{[]string{"--fail-on-regression", "--require-evidence"}, 4, "tandem report: not enough evidence to judge: fresh TTFT p95 insufficient_data ("},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"report", "--records", path}, tc.args...), &stdout, &stderr)
		if code != tc.code || !strings.HasPrefix(stderr.String(), tc.stderr) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("report %v: exit %d, stderr %q; want exit %d and one line starting %q", tc.args, code, stderr.String(), tc.code, tc.stderr)
		}
	}
}
