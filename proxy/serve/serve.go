// Package serve is tandem serve: it owns the settings of the server around
// the proxy (listeners, record file, idle timeout, shutdown grace), embedding
// the proxy's own, loads and validates them once, wires the proxy, the
// exporter and the record file into two listeners, and shuts them down in
// order.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy"
	"github.com/kestrelops/tandem/proxy/record"
)

// Options are what Run needs besides the configuration.
type Options struct {
	Version string
	Log     *slog.Logger
	// Status, when set, is served at / on the metrics listener; it is given
	// the registry tandem's metrics live in and a context that ends when
	// Run returns, for the work it does in the background.
	Status func(context.Context, prometheus.Gatherer) http.Handler
	// Registry, when set, receives tandem's metrics (the demo reads them for
	// its progress line); otherwise Run makes its own.
	Registry *prometheus.Registry
	// Listening, when set, is called with the bound proxy and metrics
	// addresses once both listeners accept connections.
	Listening func(proxyAddr, metricsAddr string)
}

// Run serves cfg, as LoadConfig returned it, until ctx is canceled, then
// stops accepting connections, lets in-flight production requests finish
// within cfg.ShutdownGrace, cancels the mirrored requests still running
// (counted as canceled) and closes the record file.
func Run(ctx context.Context, cfg Config, o Options) error {
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	// go_sched_latencies_seconds says when tandem itself was too busy for
	// its timings to be trusted: a goroutine that waits to run stamps late.
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	production := "production"
	if cfg.Mode == proxy.ModeTap {
		// Dashboards and the status page show this name on production's rows.
		production = "not measured (tap mode)"
	}
	infos := []exporter.Info{{Config: exporter.ConfigProduction, Name: production}}
	if cfg.Mirroring() {
		infos = append(infos,
			exporter.Info{Config: exporter.ConfigA, Name: cfg.AName, Model: cfg.AModel},
			exporter.Info{Config: exporter.ConfigB, Name: cfg.BName, Model: cfg.BModel})
	}
	metrics := exporter.New(reg, cfg.Classes(), infos, o.Version, exporter.BuildRevision())

	var records *record.Writer
	if cfg.RecordPath != "" {
		w, err := record.NewWriter(cfg.RecordPath, record.WriterOptions{
			MaxBytes: cfg.RecordMaxBytes, MaxFiles: cfg.RecordMaxFiles, Log: o.Log, Counter: metrics})
		if err != nil {
			return fmt.Errorf("TANDEM_RECORD_PATH: %w", err)
		}
		records = w
	}
	// abort closes the record file when Run fails before serving.
	abort := func(err error) error {
		if records != nil {
			records.Close()
		}
		return err
	}
	p, err := proxy.New(cfg.Config, metrics, records, o.Log)
	if err != nil {
		return abort(err)
	}

	proxyLn, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return abort(fmt.Errorf("TANDEM_LISTEN_ADDR: proxy listener: %w", err))
	}
	metricsLn, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		proxyLn.Close()
		return abort(fmt.Errorf("TANDEM_METRICS_ADDR: metrics listener: %w", err))
	}

	var ready atomic.Bool
	var status http.Handler
	if o.Status != nil {
		status = o.Status(ctx, reg)
	}
	// Every request's context ends when cutAll is called at the end of the
	// grace period, which also closes upgraded (websocket) connections.
	baseCtx, cutAll := context.WithCancel(context.Background())
	defer cutAll()
	// handlers counts production requests being served, so that those cut at
	// the end of the grace period are recorded before the record file closes.
	var handlers handlerGate
	proxySrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !handlers.enter() {
			http.Error(w, "tandem is shutting down", http.StatusServiceUnavailable)
			return
		}
		defer handlers.leave()
		p.ServeHTTP(w, r)
	}),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	metricsSrv := &http.Server{Handler: exporter.Handler(reg, ready.Load, status), ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 2)
	go func() { errc <- proxySrv.Serve(proxyLn) }()
	go func() { errc <- metricsSrv.Serve(metricsLn) }()
	ready.Store(true)
	o.Log.Info("tandem serving", "proxy", proxyLn.Addr().String(), "metrics", metricsLn.Addr().String(),
		"mode", cfg.Mode, "mirroring", cfg.Mirroring(), "sample_rate", cfg.SampleRate, "sample_by", cfg.SampleBy)
	if o.Listening != nil {
		o.Listening(proxyLn.Addr().String(), metricsLn.Addr().String())
	}
	checkCtx, stopCheck := context.WithCancel(ctx)
	defer stopCheck()
	go p.CheckArms(checkCtx)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	ready.Store(false)
	o.Log.Info("tandem shutting down", "grace", cfg.ShutdownGrace)
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	// Shutdown does not wait for upgraded connections; the handler gate
	// does, until the grace period ends.
	if err := proxySrv.Shutdown(graceCtx); err != nil || !handlers.closeAndWaitUntil(graceCtx) {
		o.Log.Warn("production requests and upgraded connections still open at the end of the grace period were cut")
		cutAll()
		proxySrv.Close()
		handlers.closeAndWaitUntil(context.Background())
	}
	p.Shutdown()
	metricsSrv.Close()
	if records != nil {
		if err := records.Close(); err != nil {
			o.Log.Error("record file", "err", err)
		}
		if n := records.Dropped(); n > 0 {
			o.Log.Warn("records lost to a full queue or write errors; see tandem_records_dropped_total", "count", n)
		}
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// handlerGate counts running handlers. Once closed it turns new ones away, so
// no handler can start while closeAndWaitUntil waits (which a bare WaitGroup
// forbids).
type handlerGate struct {
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

func (g *handlerGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.running.Add(1)
	return true
}

func (g *handlerGate) leave() { g.running.Done() }

// closeAndWaitUntil turns new handlers away and waits for the running ones
// to return; it reports false if ctx ended first.
func (g *handlerGate) closeAndWaitUntil(ctx context.Context) bool {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() {
		g.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
