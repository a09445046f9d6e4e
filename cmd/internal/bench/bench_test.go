package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestRunQuick runs the quick configuration end to end (with nginx when
// installed) and checks the table: every row, a finite number in every
// measured cell, and no failed request or held stream.
func TestRunQuick(t *testing.T) {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("bench", flag.ContinueOnError))
	c.Quick = true
	var out, progress bytes.Buffer
	if err := Run(context.Background(), c, &out, &progress); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if testing.Verbose() {
		os.Stdout.Write(out.Bytes())
	}

	columns := []string{Direct, Tandem0, Tandem1}
	if _, err := exec.LookPath(DefaultNginx); err == nil {
		columns = append(columns, Nginx)
	} else if !strings.Contains(out.String(), "nginx left out") {
		t.Errorf("nginx is not installed, but the output does not say so")
	}
	p := c.plan()
	table := parseTable(t, out.String())
	if got := table["Metric"]; strings.Join(got[:len(columns)], ",") != strings.Join(columns, ",") {
		t.Fatalf("columns = %q, want %q first", got, columns)
	}
	want := []string{
		ttftLabel("p50", 1), ttftLabel("p99", 1), ttftLabel("p50", 64), ttftLabel("p99", 64),
		labelThroughput, labelCPU, labelFailed,
	}
	for _, n := range p.streams {
		want = append(want, memoryLabel(n), failedHeldLabel(n))
	}
	for _, metric := range want {
		cells, ok := table[metric]
		if !ok {
			t.Errorf("no row %q", metric)
			continue
		}
		for i, name := range columns {
			v, err := leadingNumber(cells[i])
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s, %s: %q is not a finite number", metric, name, cells[i])
			}
		}
	}
	for _, metric := range append([]string{labelFailed}, failedHeld(p.streams)...) {
		for i, name := range columns {
			if cell := table[metric][i]; cell != "0" {
				t.Errorf("%s, %s = %q, want 0", metric, name, cell)
			}
		}
	}
	if !strings.Contains(out.String(), "Reproduce: `"+c.command()+"`") {
		t.Errorf("output does not give the command:\n%s", out.String())
	}
	if t.Failed() {
		t.Logf("output:\n%s\nprogress:\n%s", out.String(), progress.String())
	}
}

func failedHeld(streams []int) []string {
	var labels []string
	for _, n := range streams {
		labels = append(labels, failedHeldLabel(n))
	}
	return labels
}

// parseTable maps the first cell of every row of the Markdown table in s to
// the row's other cells.
func parseTable(t *testing.T, s string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[0]] = cells[1:]
	}
	if len(rows) == 0 {
		t.Fatalf("no table in:\n%s", s)
	}
	return rows
}

// leadingNumber parses the number a cell starts with.
func leadingNumber(cell string) (float64, error) {
	field, _, _ := strings.Cut(cell, " ")
	if field == "" {
		return 0, fmt.Errorf("empty cell")
	}
	return strconv.ParseFloat(field, 64)
}
