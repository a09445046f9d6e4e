package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/proxy/serve"
)

// Variant names, in the order of the table's columns.
const (
	Direct    = "direct"
	Tandem0   = "tandem s=0"
	Tandem1   = "tandem s=1"
	Reference = "Go ReverseProxy"
	Nginx     = "nginx"
	NginxTap  = "nginx + tandem tap"
)

// variant is one way from the client to the production upstream.
type variant struct {
	name string
	url  string
	ext  external    // nil when the proxy, if any, runs in this process
	prod *upstream   // production
	arms []*upstream // mirrored-to upstreams, held with production in the memory phase
	// tapHere: nginx mirrors to a tandem that runs in this process
	tapHere bool
}

// tally is everything measured of one variant.
type tally struct {
	ttft     map[int][]time.Duration   // by concurrency
	rounds   map[int][][]time.Duration // the same, round by round
	frames   map[int]int               // content frames received, by concurrency
	wall     map[int]time.Duration     // phase wall time, by concurrency
	requests int
	failed   int
	cpu      time.Duration // this process, over all phases
	extCPU   time.Duration // the proxy's own processes, over all phases

	memory  map[int]float64 // bytes per in-flight stream, by stream count (this process, or the proxy's own)
	held    map[int]int     // streams in flight when memory was measured
	errors  map[int]int     // failed or never in flight, by stream count
	skipped map[int]string  // why a stream count was not run
}

func newTally() *tally {
	return &tally{
		ttft: map[int][]time.Duration{}, rounds: map[int][][]time.Duration{}, frames: map[int]int{}, wall: map[int]time.Duration{},
		memory: map[int]float64{}, held: map[int]int{}, errors: map[int]int{}, skipped: map[int]string{},
	}
}

// Run runs the benchmark: latency and throughput rounds, then the memory
// phases, and writes the Markdown results table to stdout and progress to
// stderr.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	// The tandems under test log to stderr from their own goroutines.
	stderr = &lockedWriter{w: stderr}
	if err := c.Validate(); err != nil {
		return err
	}
	p := c.plan()
	limit := raiseFileLimit(uint64(8*slices.Max(p.streams) + fileReserve))
	fmt.Fprintf(stderr, "bench: open file limit %d\n", limit)

	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()
	variants, nginxNote, err := startVariants(ctx, c, p, stderr, &stops)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: %s\n", nginxNote)

	client := newClient(2 * concurrencies[len(concurrencies)-1])
	defer client.CloseIdleConnections()
	tallies := map[string]*tally{}
	for _, v := range variants {
		tallies[v.name] = newTally()
	}
	b := &bench{client: client, plan: p, limit: limit, progress: stderr, started: time.Now()}
	if err := b.rounds(ctx, variants, tallies); err != nil {
		return err
	}
	if err := b.memory(ctx, variants, tallies); err != nil {
		return err
	}

	rep := buildReport(c, p, variants, tallies)
	rep.notes = append(rep.notes, nginxNote)
	rep.write(stdout)
	return nil
}

// startVariants starts the upstreams and the proxies and returns the
// variants in column order and a note on nginx. Everything started is
// stopped by the functions appended to stops.
func startVariants(ctx context.Context, c Config, p plan, stderr io.Writer, stops *[]func()) ([]*variant, string, error) {
	var ups [3]*upstream // production, A, B
	for i := range ups {
		u, err := startUpstream(p.frames)
		if err != nil {
			return nil, "", err
		}
		*stops = append(*stops, u.close)
		ups[i] = u
	}
	prod := ups[0]
	peak := slices.Max(p.streams)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	variants := []*variant{{name: Direct, url: prod.url, prod: prod}}
	for _, rate := range []string{"0", "1"} {
		env := tandemEnv(prod, ups[1], ups[2], rate, peak)
		v := &variant{name: Tandem0, prod: prod}
		if rate == "1" {
			v.name, v.arms = Tandem1, ups[1:]
		}
		if c.Tandem != "" {
			t, err := startTandemProcess(ctx, c.Tandem, env)
			if err != nil {
				return nil, "", err
			}
			*stops = append(*stops, t.stop)
			v.url, v.ext = t.url, t
		} else {
			url, stop, err := startTandem(ctx, log, env)
			if err != nil {
				return nil, "", err
			}
			*stops = append(*stops, stop)
			v.url = url
		}
		variants = append(variants, v)
	}

	// The reference runs where tandem runs: in a process of its own (this
	// executable again), or in this process.
	var self string
	if c.Tandem != "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, "", err
		}
		self = exe
	}
	refURL, refExt, stopRef, err := startReference(ctx, self, prod)
	if err != nil {
		return nil, "", fmt.Errorf("starting the reference proxy: %w", err)
	}
	*stops = append(*stops, stopRef)
	variants = append(variants, &variant{name: Reference, url: refURL, ext: refExt, prod: prod})

	if p.nginx == "" {
		return variants, "nginx left out (--nginx is empty)", nil
	}
	if _, err := exec.LookPath(p.nginx); err != nil {
		return variants, fmt.Sprintf("nginx left out: %s is not installed", p.nginx), nil
	}
	n, err := startNginx(ctx, p.nginx, strings.TrimPrefix(prod.url, "http://"), "", peak)
	if err != nil {
		return nil, "", fmt.Errorf("starting nginx: %w", err)
	}
	*stops = append(*stops, n.stop)
	variants = append(variants, &variant{name: Nginx, url: n.url, ext: n, prod: prod})

	// nginx again, mirroring every request to tandem in tap mode, which
	// samples all of them and sends them to A and B.
	env := tandemEnv(nil, ups[1], ups[2], "1", peak)
	env["TANDEM_MODE"] = "tap"
	tap := &variant{name: NginxTap, prod: prod, arms: ups[1:]}
	var tapURL string
	var tapProc external
	if c.Tandem != "" {
		t, err := startTandemProcess(ctx, c.Tandem, env)
		if err != nil {
			return nil, "", err
		}
		*stops = append(*stops, t.stop)
		tapURL, tapProc = t.url, t
	} else {
		url, stop, err := startTandem(ctx, log, env)
		if err != nil {
			return nil, "", err
		}
		*stops = append(*stops, stop)
		tapURL, tap.tapHere = url, true
	}
	nt, err := startNginx(ctx, p.nginx, strings.TrimPrefix(prod.url, "http://"), strings.TrimPrefix(tapURL, "http://"), peak)
	if err != nil {
		return nil, "", fmt.Errorf("starting nginx with a mirror: %w", err)
	}
	*stops = append(*stops, nt.stop)
	tap.url, tap.ext = nt.url, externals{nt, tapProc}
	return append(variants, tap), "nginx " + n.version, nil
}

// externals are the processes of one variant, measured together; nil
// entries (parts that run in this process) are left out.
type externals []external

func (e externals) usage() (cpu time.Duration, rss int64) {
	for _, x := range e {
		if x == nil {
			continue
		}
		c, r := x.usage()
		cpu += c
		rss += r
	}
	return cpu, rss
}

// bench runs the phases of one benchmark.
type bench struct {
	client   *http.Client
	plan     plan
	limit    uint64 // open files this process may hold
	progress io.Writer
	started  time.Time
	nextID   int // of the next request, so every prompt is new
}

// rounds runs the latency and throughput phases: every round runs every
// variant at every concurrency, starting each round with the next variant.
func (b *bench) rounds(ctx context.Context, variants []*variant, tallies map[string]*tally) error {
	p := b.plan
	for r := range p.rounds {
		for _, conc := range concurrencies {
			for i := range variants {
				v := variants[(i+r)%len(variants)]
				res, cpu, extCPU := runPhase(ctx, b.client, v, p, conc, b.nextID)
				b.nextID += p.requests
				if err := ctx.Err(); err != nil {
					return err
				}
				t := tallies[v.name]
				t.ttft[conc] = append(t.ttft[conc], res.ttfts...)
				t.rounds[conc] = append(t.rounds[conc], res.ttfts)
				t.frames[conc] += res.frames
				t.wall[conc] += res.wall
				t.requests += p.requests
				t.failed += res.errors
				t.cpu += cpu
				t.extCPU += extCPU
				fmt.Fprintf(b.progress, "bench: round %d/%d, %2d concurrent, %-10s p50 TTFT %.3f ms, %.0f frames/s, %d failed (%s)\n",
					r+1, p.rounds, conc, v.name, percentile(res.ttfts, 0.5)*1e3, res.framesPerSecond(), res.errors, b.elapsed())
			}
		}
	}
	return nil
}

// memory runs the memory phases: each variant holds each number of streams
// in flight, unless that needs more open files than allowed.
func (b *bench) memory(ctx context.Context, variants []*variant, tallies map[string]*tally) error {
	for _, n := range b.plan.streams {
		for _, v := range variants {
			t := tallies[v.name]
			if reason := b.tooManyFiles(v, n); reason != "" {
				t.skipped[n] = reason
				fmt.Fprintf(b.progress, "bench: %d in-flight streams, %-10s %s\n", n, v.name, reason)
				continue
			}
			held, perStream, failed := holdStreams(ctx, b.client, v, b.plan.frames, n, b.nextID)
			b.nextID += n
			if err := ctx.Err(); err != nil {
				return err
			}
			t.memory[n], t.held[n], t.errors[n] = perStream, held, failed
			what := "resident memory"
			if v.ext == nil {
				what = "Go memory of this process"
			}
			fmt.Fprintf(b.progress, "bench: %d in-flight streams, %-10s %d held, %s grew %.1f KiB per stream, %d failed (%s)\n",
				n, v.name, held, what, perStream/1024, failed, b.elapsed())
		}
	}
	return nil
}

func (b *bench) elapsed() time.Duration { return time.Since(b.started).Round(time.Second) }

// tooManyFiles says why holding n streams through v would exceed the open
// file limit, in this process or in the proxy's; empty when it would not.
func (b *bench) tooManyFiles(v *variant, n int) string {
	if need := uint64(n*v.filesPerStream() + fileReserve); need > b.limit {
		return fmt.Sprintf("not run: needs %d open files, the limit is %d", need, b.limit)
	}
	if need := uint64(n*v.proxyFilesPerStream() + fileReserve); need > b.limit {
		return fmt.Sprintf("not run: the proxy needs %d open files, the limit is %d", need, b.limit)
	}
	return ""
}

// fileReserve is the open files kept for listeners, idle connections and
// the runtime, beyond those of the in-flight streams.
const fileReserve = 1024

// filesPerStream is the descriptors one held stream takes in this process:
// the client's connection and, for each upstream the stream reaches, the
// upstream's side, plus the proxy's two sides when it runs in this process.
func (v *variant) filesPerStream() int {
	files := 2 + len(v.arms)
	if v.name != Direct && v.ext == nil {
		files += v.proxyFilesPerStream()
	}
	if v.tapHere {
		files += 1 + len(v.arms) // tandem's: from nginx, and to A and B
	}
	return files
}

// proxyFilesPerStream is the descriptors one held stream takes in the
// proxy: the client's connection and one to each upstream it reaches.
func (v *variant) proxyFilesPerStream() int {
	switch v.name {
	case Direct:
		return 0
	case NginxTap:
		return 3 // nginx: the client, production and the mirror
	}
	return 2 + len(v.arms)
}

// tandemEnv is tandem's configuration in front of prod, with A and B
// configured and sampling rate rate, for up to streams mirrored streams.
// A nil prod leaves production out (tap mode).
func tandemEnv(prod, a, b *upstream, rate string, streams int) map[string]string {
	env := map[string]string{
		"TANDEM_A_URL":                a.url,
		"TANDEM_B_URL":                b.url,
		"TANDEM_SAMPLE_RATE":          rate,
		"TANDEM_SAMPLE_BY":            "request",
		"TANDEM_SHADOW_MAX_IN_FLIGHT": fmt.Sprint(streams + 1024),
		"TANDEM_SHUTDOWN_GRACE":       "5s",
	}
	if prod != nil {
		env["TANDEM_PRIMARY_URL"] = prod.url
	}
	return env
}

// startTandem serves tandem in this process, configured by env, on
// loopback ports. It returns tandem's base URL.
func startTandem(ctx context.Context, log *slog.Logger, env map[string]string) (string, func(), error) {
	vars := map[string]string{"TANDEM_LISTEN_ADDR": "127.0.0.1:0", "TANDEM_METRICS_ADDR": "127.0.0.1:0"}
	maps.Copy(vars, env)
	cfg, err := serve.LoadConfig(ctx, envconfig.MapLookuper(vars))
	if err != nil {
		return "", nil, err
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve.Run(serveCtx, cfg, serve.Options{
			Version:   "bench",
			Log:       log,
			Listening: func(proxyAddr, _ string) { listening <- proxyAddr },
		})
	}()
	stop := func() {
		cancel()
		<-served
	}
	select {
	case addr := <-listening:
		return "http://" + addr, stop, nil
	case err := <-served:
		cancel()
		return "", nil, fmt.Errorf("starting tandem: %w", err)
	}
}

// runPhase runs one closed-loop phase and returns it with the CPU time this
// process and the proxy's own processes used during it. For a mirroring variant the
// phase ends when the arms have finished too.
func runPhase(ctx context.Context, client *http.Client, v *variant, p plan, conc, firstID int) (phaseResult, time.Duration, time.Duration) {
	cpu0 := processCPU()
	var ext0 time.Duration
	if v.ext != nil {
		ext0, _ = v.ext.usage()
	}
	res := closedLoop(ctx, client, v.url, p.requests, conc, p.frames, firstID)
	for _, arm := range v.arms {
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		arm.waitIdle(waitCtx)
		cancel()
	}
	cpu := processCPU() - cpu0
	var extCPU time.Duration
	if v.ext != nil {
		ext1, _ := v.ext.usage()
		extCPU = ext1 - ext0
	}
	return res, cpu, extCPU
}

// holdTimeout bounds how long the memory phase waits for its streams to be
// in flight.
const holdTimeout = 90 * time.Second

// holdStreams opens n streams through v, holds them all mid-stream (after
// their first content frame), measures the memory they hold, releases them
// and reads them to the end. It returns the streams in flight at the
// measurement, the memory per stream (the resident memory of a proxy in its
// own processes, or this process's Go heap and stacks), and the streams that
// failed or were never in flight.
func holdStreams(ctx context.Context, client *http.Client, v *variant, frames, n, firstID int) (held int, perStream float64, failed int) {
	ups := append([]*upstream{v.prod}, v.arms...)
	for _, u := range ups {
		u.dropIdle()
	}
	client.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	before := memoryOf(v)

	var releases []func()
	for _, u := range ups {
		releases = append(releases, u.startHold())
	}
	var reached, errs, late atomic.Int64
	var measured atomic.Bool
	opening := make(chan struct{}, 256)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			opening <- struct{}{}
			var once sync.Once
			open := func() { once.Do(func() { <-opening }) }
			inTime := false
			res := stream(ctx, client, v.url, firstID+i, frames, func() {
				inTime = !measured.Load()
				reached.Add(1)
				open()
			})
			open()
			switch {
			case res.err != nil:
				errs.Add(1)
			case !inTime:
				late.Add(1)
			}
		})
	}
	deadline := time.Now().Add(holdTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil && !allHeld(ups, int64(n), &reached, &errs) {
		time.Sleep(10 * time.Millisecond)
	}
	measured.Store(true)
	held = int(reached.Load())
	after := memoryOf(v)
	for _, release := range releases {
		release()
	}
	wg.Wait()
	failed = int(errs.Load() + late.Load())
	if held > 0 {
		perStream = float64(after-before) / float64(held)
	}
	return held, perStream, failed
}

// allHeld reports whether every stream is held at every upstream, or has
// failed.
func allHeld(ups []*upstream, n int64, reached, errs *atomic.Int64) bool {
	if reached.Load()+errs.Load() < n {
		return false
	}
	for _, u := range ups {
		if u.held.Load() < reached.Load() {
			return false
		}
	}
	return true
}

// memoryOf is the resident memory of a proxy in its own processes, this
// process's Go memory otherwise.
func memoryOf(v *variant) int64 {
	if v.ext != nil {
		_, rss := v.ext.usage()
		return rss
	}
	return goMemory()
}

// machine describes where the benchmark ran.
func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %s/%s, %d CPUs, GOMAXPROCS %d, host %s", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), host)
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
