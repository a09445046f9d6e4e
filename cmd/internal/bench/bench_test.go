package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/proxy/serve"
)

// TestMain lets the tests run this test binary as the tandem binary:
// "bench.test serve" stands in for "tandem serve".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serveFromEnv())
	}
	if os.Getenv(ReferenceEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := ServeReference(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveFromEnv() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg, err := serve.LoadConfig(ctx, envconfig.OsLookuper())
	if err == nil {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		err = serve.Run(ctx, cfg, serve.Options{Version: "bench-test", Log: log})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestRunQuick runs the quick configuration end to end, tandem in this
// process, with nginx when installed.
func TestRunQuick(t *testing.T) {
	c := quickConfig()
	checkRun(t, c)
}

// TestRunQuickTandemProcess runs the quick configuration with tandem in a
// process of its own and without nginx.
func TestRunQuickTandemProcess(t *testing.T) {
	c := quickConfig()
	c.Tandem, c.Nginx = os.Args[0], ""
	out := checkRun(t, c)
	if !strings.Contains(out, "tandem runs as a separate process") || !strings.Contains(out, "nginx left out (--nginx is empty)") {
		t.Errorf("the notes do not say how tandem ran and that nginx was left out:\n%s", out)
	}
}

func quickConfig() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("bench", flag.ContinueOnError))
	c.Quick = true
	return c
}

// checkRun runs c and checks the table: every row, a finite number in every
// measured cell, and no failed request or held stream. It returns the
// output.
func checkRun(t *testing.T, c Config) string {
	t.Helper()
	var out, progress bytes.Buffer
	if err := Run(context.Background(), c, &out, &progress); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if testing.Verbose() {
		os.Stdout.Write(out.Bytes())
	}

	columns := []string{Direct, Tandem0, Tandem1, Reference}
	if _, err := exec.LookPath(c.Nginx); c.Nginx != "" && err == nil {
		columns = append(columns, Nginx, NginxTap)
	} else if !strings.Contains(out.String(), "nginx left out") {
		t.Errorf("nginx was not run, but the output does not say so")
	}
	p := c.plan()
	table := parseTable(t, out.String())
	if got := table["Metric"]; len(got) < len(columns) || strings.Join(got[:len(columns)], ",") != strings.Join(columns, ",") {
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
		t.Errorf("output does not give the command %q", c.command())
	}
	if t.Failed() {
		t.Logf("output:\n%s\nprogress:\n%s", out.String(), progress.String())
	}
	return out.String()
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
