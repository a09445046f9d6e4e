// Package demo runs the whole product in one process: three simulated
// engines (production, A, B), tandem serve mirroring all traffic to A and B,
// and an open-loop load generator, then prints what the evidence supports.
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/cmd/internal/loadgen"
	"github.com/kestrelops/tandem/cmd/internal/report"
	"github.com/kestrelops/tandem/cmd/internal/sim"
	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/statuspage"
	"github.com/kestrelops/tandem/proxy/record"
	"github.com/kestrelops/tandem/proxy/serve"
)

// Config is the configuration of tandem demo.
type Config struct {
	Duration    time.Duration
	Rate        float64
	Seed        int64
	ListenAddr  string
	MetricsAddr string
	// Profiles of the three simulated engines (see tandem sim --profile).
	ProductionProfile, AProfile, BProfile string
	RepeatShare                           float64
	SummaryJSON                           string
	RecordPath                            string
	// NoReport leaves out the closing report.
	NoReport bool
	// Linger keeps /metrics and the status page up after the load ends, so
	// a scraper sees the last requests.
	Linger time.Duration
}

// RegisterFlags defines the demo's flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Duration, "duration", 75*time.Second, "how long the load runs")
	fs.Float64Var(&c.Rate, "rate", 10, "requests per second (Poisson arrivals, open loop)")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of the workload and the simulated engines")
	fs.StringVar(&c.ListenAddr, "listen-addr", "127.0.0.1:8080", "proxy listener")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "127.0.0.1:9464", "metrics and status page listener")
	fs.StringVar(&c.ProductionProfile, "production-profile", "production", "simulated engine behind production")
	fs.StringVar(&c.AProfile, "a-profile", "a", "simulated engine of configuration A")
	fs.StringVar(&c.BProfile, "b-profile", "b", "simulated engine of configuration B")
	fs.Float64Var(&c.RepeatShare, "repeat-share", 0.6, "share of requests that reuse a prefix")
	fs.StringVar(&c.SummaryJSON, "summary-json", "", "also write the summary as JSON to this file")
	fs.StringVar(&c.RecordPath, "records", "", "keep tandem's per-request records in this file (default: a temporary file)")
	fs.BoolVar(&c.NoReport, "no-report", false, "leave out the closing report")
	fs.DurationVar(&c.Linger, "linger", 0, "keep /metrics and the status page up this long after the load ends")
}

// Validate names the first bad flag.
func (c Config) Validate() error {
	if c.Duration <= 0 {
		return fmt.Errorf("--duration must be positive, got %s", c.Duration)
	}
	if !(c.Rate > 0) {
		return fmt.Errorf("--rate must be positive, got %g", c.Rate)
	}
	if math.IsInf(c.Rate, 1) {
		return fmt.Errorf("--rate must be finite, got %g", c.Rate)
	}
	if c.Linger < 0 {
		return fmt.Errorf("--linger must not be negative, got %s", c.Linger)
	}
	if !(c.RepeatShare >= 0 && c.RepeatShare <= 1) {
		return fmt.Errorf("--repeat-share must be between 0 and 1, got %g", c.RepeatShare)
	}
	profiles := sim.Profiles()
	for _, p := range []struct{ flag, name string }{{"production-profile", c.ProductionProfile}, {"a-profile", c.AProfile}, {"b-profile", c.BProfile}} {
		if _, ok := profiles[p.name]; !ok {
			return fmt.Errorf("--%s: unknown profile %q (have %s)", p.flag, p.name, strings.Join(sim.ProfileNames(), ", "))
		}
	}
	return nil
}

// Run runs the demo until the load ends or ctx is canceled (Ctrl-C), then
// prints the summary and the report of what was measured.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	if err := c.Validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	engines := map[string]string{}
	for _, e := range []struct{ config, profile string }{
		{exporter.ConfigProduction, c.ProductionProfile}, {exporter.ConfigA, c.AProfile}, {exporter.ConfigB, c.BProfile},
	} {
		url, stop, err := startEngine(sim.Profiles()[e.profile], c.Seed)
		if err != nil {
			return err
		}
		defer stop()
		engines[e.config] = url
	}

	recordPath := c.RecordPath
	if recordPath == "" {
		dir, err := os.MkdirTemp("", "tandem-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		recordPath = filepath.Join(dir, "records.jsonl")
	}
	cfg, err := serve.LoadConfig(ctx, envconfig.MapLookuper(tandemEnv(c, engines, recordPath)))
	if err != nil {
		return fmt.Errorf("%w (choose other ports with --listen-addr and --metrics-addr)", err)
	}

	reg := prometheus.NewRegistry()
	listening := make(chan [2]string, 1)
	serveCtx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	served := make(chan error, 1)
	go func() {
		served <- serve.Run(serveCtx, cfg, serve.Options{
			Version:  "demo",
			Log:      log,
			Registry: reg,
			Status: func(ctx context.Context, g prometheus.Gatherer) http.Handler {
				return statuspage.New(ctx, g, statuspage.Options{})
			},
			Listening: func(p, m string) { listening <- [2]string{p, m} },
		})
	}()
	var addrs [2]string
	select {
	case addrs = <-listening:
	case err := <-served:
		return fmt.Errorf("%w (choose other ports with --listen-addr and --metrics-addr)", err)
	}
	fmt.Fprintf(stdout, "tandem demo: production, A (%s) and B (%s) are simulated engines; tandem mirrors every request to A and B.\n", c.AProfile, c.BProfile)
	fmt.Fprintf(stdout, "  proxy:       http://%s/v1/chat/completions\n", addrs[0])
	fmt.Fprintf(stdout, "  status page: http://%s/\n", addrs[1])
	fmt.Fprintf(stdout, "  metrics:     http://%s/metrics\n", addrs[1])
	fmt.Fprintf(stdout, "Running %s of open-loop load at %g requests/s (Ctrl-C ends it early).\n\n", c.Duration, c.Rate)

	progress := newProgress(reg, stderr)
	_, _, err = loadgen.Run(ctx, loadConfig(c, addrs[0]), progress.print)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	interrupted := ctx.Err() != nil
	waitForShadows(ctx, reg, 30*time.Second)
	select {
	case <-time.After(c.Linger):
	case <-ctx.Done():
	}
	stopServe()
	if err := <-served; err != nil {
		return err
	}

	recs, read, err := record.ReadFiles(recordPath)
	if err != nil {
		return err
	}
	rep, reportErr := report.FromRecords(recs, read, report.DefaultOptions())
	summary := Summarize(rep)
	summary.Interrupted = interrupted
	fmt.Fprintln(stdout)
	summary.WriteText(stdout)
	if c.SummaryJSON != "" {
		if err := summary.WriteJSONFile(c.SummaryJSON); err != nil {
			return err
		}
	}
	if c.NoReport {
		return nil
	}
	if reportErr != nil {
		return reportErr
	}
	fmt.Fprintln(stdout)
	return rep.Write(stdout, "text")
}

// tandemEnv configures tandem serve for the demo: every request mirrored to
// the simulated arms, one record file never rotated, the rest tandem's
// defaults.
func tandemEnv(c Config, engines map[string]string, recordPath string) map[string]string {
	return map[string]string{
		"TANDEM_LISTEN_ADDR":          c.ListenAddr,
		"TANDEM_METRICS_ADDR":         c.MetricsAddr,
		"TANDEM_PRIMARY_URL":          engines[exporter.ConfigProduction],
		"TANDEM_A_URL":                engines[exporter.ConfigA],
		"TANDEM_B_URL":                engines[exporter.ConfigB],
		"TANDEM_A_NAME":               "sim " + c.AProfile,
		"TANDEM_B_NAME":               "sim " + c.BProfile,
		"TANDEM_SAMPLE_RATE":          "1",
		"TANDEM_SHADOW_TIMEOUT":       "60s",
		"TANDEM_SHADOW_MAX_IN_FLIGHT": "1024",
		"TANDEM_RECORD_PATH":          recordPath,
		"TANDEM_RECORD_MAX_BYTES":     "1073741824",
		"TANDEM_RECORD_MAX_FILES":     "0",
		"TANDEM_SHUTDOWN_GRACE":       "10s",
	}
}

func loadConfig(c Config, proxyAddr string) loadgen.Config {
	var lc loadgen.Config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	lc.RegisterFlags(fs) // the load generator's own defaults
	lc.Target = "http://" + proxyAddr
	lc.Rate = c.Rate
	lc.Duration = c.Duration
	lc.Requests = 0
	lc.Seed = c.Seed
	lc.RepeatShare = c.RepeatShare
	return lc
}

// startEngine serves a simulated engine on a loopback port.
func startEngine(p sim.Params, seed int64) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	engine := sim.New(p, seed)
	srv := &http.Server{Handler: engine, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() {
		srv.Close()
		engine.Close()
	}, nil
}

// waitForShadows waits until no mirrored request is in flight, so the last
// requests of the load are measured on both arms rather than canceled; at
// most limit, and not after ctx ends.
func waitForShadows(ctx context.Context, g prometheus.Gatherer, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for inFlight(g) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func inFlight(g prometheus.Gatherer) float64 {
	gathered, err := exporter.Gather(g)
	if err != nil {
		return 0
	}
	var n float64
	for s := range gathered.Series(exporter.MetricShadowInFlight) {
		n += s.Value()
	}
	return n
}
