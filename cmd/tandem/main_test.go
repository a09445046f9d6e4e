package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
