package serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"
	"go.uber.org/goleak"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

const chatBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"Say hi"}]}`

// running is tandem serve in-process; cancel stands in for SIGTERM.
type running struct {
	proxyAddr   string
	metricsAddr string
	records     string
	cancel      context.CancelFunc
	done        chan error
}

func start(t *testing.T, prod, a, b *testupstream.Server, grace string) *running {
	t.Helper()
	return startWith(t, prod.URL, a, b, map[string]string{"TANDEM_SHUTDOWN_GRACE": grace}, nil)
}

// startWith is start with the variables in env added or replaced and, when
// reg is not nil, tandem's metrics in reg.
func startWith(t *testing.T, prodURL string, a, b *testupstream.Server, env map[string]string, reg *prometheus.Registry) *running {
	t.Helper()
	vars := map[string]string{
		"TANDEM_LISTEN_ADDR":  "127.0.0.1:0",
		"TANDEM_METRICS_ADDR": "127.0.0.1:0",
		"TANDEM_PRIMARY_URL":  prodURL,
		"TANDEM_A_URL":        a.URL,
		"TANDEM_B_URL":        b.URL,
		"TANDEM_SAMPLE_RATE":  "1",
		"TANDEM_SAMPLE_BY":    "request",
		"TANDEM_RECORD_PATH":  filepath.Join(t.TempDir(), "records.jsonl"),
	}
	maps.Copy(vars, env)
	r := &running{records: vars["TANDEM_RECORD_PATH"], done: make(chan error, 1)}
	cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(vars))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	listening := make(chan [2]string, 1)
	go func() {
		r.done <- Run(ctx, cfg, Options{Version: "test", Log: slog.New(slog.DiscardHandler), Registry: reg,
			Listening: func(proxyAddr, metricsAddr string) { listening <- [2]string{proxyAddr, metricsAddr} }})
	}()
	select {
	case addrs := <-listening:
		r.proxyAddr, r.metricsAddr = addrs[0], addrs[1]
	case err := <-r.done:
		t.Fatalf("Run returned before listening: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("tandem never listened")
	}
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// stop waits for Run to return after the cancel.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after shutdown")
		return nil
	}
}

// outcomes reads the record file: config to outcomes.
func (r *running) outcomes(t *testing.T) map[string][]string {
	t.Helper()
	recs, stats, err := record.ReadFiles(r.records)
	if err != nil || stats.Skipped != 0 {
		t.Fatal(err, stats)
	}
	out := map[string][]string{}
	for _, rec := range recs {
		out[rec.Config] = append(out[rec.Config], rec.Outcome)
	}
	return out
}

// openStream posts a chat request and reads its first frame.
func openStream(t *testing.T, addr string) (*http.Response, []byte) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	first := []byte(strings.SplitAfter(testupstream.StreamBody(3), "\n\n")[0])
	got := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != string(first) {
		t.Fatalf("first frame %q, %v", got, err)
	}
	return resp, got
}

// waitRefused dials addr until the connection is refused.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		conn, err := net.Dial("tcp", addr)
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return
		case errors.Is(err, syscall.ECONNRESET):
			// Accepted by the kernel as the listener closed.
		case err != nil:
			t.Fatalf("dial after shutdown: %v, want connection refused", err)
		default:
			conn.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("tandem still accepts connections after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func receive(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// TestShutdownFinishesProductionAndCancelsShadows: on SIGTERM, tandem stops
// accepting connections at once, lets the production stream in flight finish,
// and cancels the mirrored request still running, recorded as canceled.
func TestShutdownFinishesProductionAndCancelsShadows(t *testing.T) {
	pace := make(chan struct{}, 16)
	never := make(chan struct{})
	prod := testupstream.New(testupstream.Script{Pace: pace})
	a := testupstream.New(testupstream.Script{Release: never})
	b := testupstream.New(testupstream.Script{})
	for _, u := range []*testupstream.Server{prod, a, b} {
		t.Cleanup(u.Close)
	}
	reg := prometheus.NewRegistry()
	r := startWith(t, prod.URL, a, b, map[string]string{"TANDEM_SHUTDOWN_GRACE": "30s"}, reg)

	resp, got := openStream(t, r.proxyAddr)
	defer resp.Body.Close()
	receive(t, a.Arrived(), "A receiving the mirrored request")
	// Shadows still running when production ends are canceled: B must be recorded before.
	bRecorded := func() bool {
		g, err := exporter.Gather(reg)
		if err != nil {
			t.Fatal(err)
		}
		for s := range g.Series(exporter.MetricRequests) {
			if s.Label(exporter.LabelConfig) == exporter.ConfigB && s.Value() > 0 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !bRecorded(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B never finished")
		}
	}
	r.cancel()
	waitRefused(t, r.proxyAddr)
	select {
	case err := <-r.done:
		t.Fatalf("Run returned (%v) with a production stream in flight", err)
	default:
	}

	for range len(strings.SplitAfter(testupstream.StreamBody(3), "\n\n")) - 2 {
		pace <- struct{}{}
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(got)+string(rest) != testupstream.StreamBody(3) {
		t.Fatalf("production stream cut by shutdown: %q, %v", string(got)+string(rest), err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	receive(t, a.Canceled(), "A seeing its request canceled")
	want := map[string]string{exporter.ConfigProduction: exporter.OutcomeCompleted,
		exporter.ConfigA: exporter.OutcomeCanceled, exporter.ConfigB: exporter.OutcomeCompleted}
	outcomes := r.outcomes(t)
	for config, outcome := range want {
		if got := outcomes[config]; len(got) != 1 || got[0] != outcome {
			t.Errorf("%s recorded %v, want [%s]", config, got, outcome)
		}
	}
}

// TestShutdownCutsProductionAfterGrace: a production stream still running
// when the grace period ends is cut; the client sees a cut, not an end, and
// the request is recorded as canceled before the record file closes.
func TestShutdownCutsProductionAfterGrace(t *testing.T) {
	prod := testupstream.New(testupstream.Script{Pace: make(chan struct{})})
	a := testupstream.New(testupstream.Script{})
	b := testupstream.New(testupstream.Script{})
	for _, u := range []*testupstream.Server{prod, a, b} {
		t.Cleanup(u.Close)
	}
	r := start(t, prod, a, b, "50ms")

	resp, _ := openStream(t, r.proxyAddr)
	defer resp.Body.Close()
	r.cancel()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rest, err := io.ReadAll(resp.Body); err == nil {
		t.Fatalf("client read a clean end after the grace period: %q", rest)
	}
	receive(t, prod.Canceled(), "production seeing its request canceled")
	if got := r.outcomes(t)[exporter.ConfigProduction]; len(got) != 1 || got[0] != exporter.OutcomeCanceled {
		t.Errorf("production recorded %v, want [%s]", got, exporter.OutcomeCanceled)
	}
}

// A Run that fails to start leaves nothing behind: the record file is
// closed and its writer stopped.
func TestFailedStartClosesRecordFile(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(map[string]string{
		"TANDEM_LISTEN_ADDR":  taken.Addr().String(),
		"TANDEM_METRICS_ADDR": "127.0.0.1:0",
		"TANDEM_PRIMARY_URL":  "http://127.0.0.1:1",
		"TANDEM_RECORD_PATH":  filepath.Join(t.TempDir(), "records.jsonl"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), cfg, Options{Version: "test", Log: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "proxy listener") {
		t.Fatalf("Run = %v, want the proxy listener's error", err)
	}
}

// A record file that cannot be written costs records, never requests or
// readiness; the errors are counted.
func TestRecordWriteErrorsSpareRequestsAndReadiness(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("this test needs Linux's /dev/full: %v", err)
	}
	prod, a, b := testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{})
	for _, u := range []*testupstream.Server{prod, a, b} {
		t.Cleanup(u.Close)
	}
	reg := prometheus.NewRegistry()
	r := startWith(t, prod.URL, a, b, map[string]string{"TANDEM_RECORD_PATH": "/dev/full"}, reg)

	resp, err := http.Post("http://"+r.proxyAddr+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != testupstream.StreamBody(3) {
		t.Fatalf("status %d, %q, %v: want production's stream", resp.StatusCode, body, err)
	}
	counted := func() (writeErrors, lost float64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case exporter.MetricRecordWriteErrors:
					writeErrors += m.GetCounter().GetValue()
				case exporter.MetricRecordsDropped:
					for _, l := range m.GetLabel() {
						if l.GetName() == exporter.LabelReason && l.GetValue() == exporter.RecordDropWriteError {
							lost += m.GetCounter().GetValue()
						}
					}
				}
			}
		}
		return writeErrors, lost
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if writeErrors, lost := counted(); writeErrors > 0 && lost > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no record write error counted")
		}
	}
	ready, err := http.Get("http://" + r.metricsAddr + "/-/ready")
	if err != nil {
		t.Fatal(err)
	}
	ready.Body.Close()
	if ready.StatusCode != http.StatusOK {
		t.Errorf("/-/ready = %d while records fail, want 200", ready.StatusCode)
	}
	r.cancel()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil: losing records is not a failure of tandem", err)
	}
}

func TestHandlerGateTurnsAwayHandlersAfterClose(t *testing.T) {
	var g handlerGate
	if !g.enter() {
		t.Fatal("an open gate turned a handler away")
	}
	waited := make(chan struct{})
	go func() {
		g.closeAndWaitUntil(context.Background())
		close(waited)
	}()
	// closeAndWaitUntil must wait for the running handler, and new ones must be
	// turned away meanwhile.
	for {
		g.mu.Lock()
		closed := g.closed
		g.mu.Unlock()
		if closed {
			break
		}
		runtime.Gosched()
	}
	if g.enter() {
		t.Fatal("a closed gate let a handler in")
	}
	select {
	case <-waited:
		t.Fatal("closeAndWaitUntil returned while a handler was running")
	default:
	}
	g.leave()
	<-waited
}

// TestShutdownClosesUpgradedConnectionsAfterGrace: an upgraded (websocket)
// connection is not a request Go's Shutdown waits for; tandem closes it at
// the end of the grace period and Run returns.
func TestShutdownClosesUpgradedConnectionsAfterGrace(t *testing.T) {
	prod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo until the other side closes
	}))
	defer prod.Close()
	a, b := testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{})
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	r := startWith(t, prod.URL, a, b, map[string]string{"TANDEM_SHUTDOWN_GRACE": "1s"}, nil)

	conn, err := net.Dial("tcp", r.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %v, %v", resp, err)
	}
	io.WriteString(conn, "ping")
	echo := make([]byte, 4)
	if _, err := io.ReadFull(br, echo); err != nil || string(echo) != "ping" {
		t.Fatalf("echo %q, %v", echo, err)
	}

	r.cancel()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the upgraded connection is still open after Run returned")
	}
}

// TestIdleConnectionsAreClosed: a keep-alive connection left idle longer
// than TANDEM_IDLE_TIMEOUT is closed by tandem.
func TestIdleConnectionsAreClosed(t *testing.T) {
	prod, a, b := testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{})
	for _, u := range []*testupstream.Server{prod, a, b} {
		t.Cleanup(u.Close)
	}
	r := startWith(t, prod.URL, a, b, map[string]string{"TANDEM_IDLE_TIMEOUT": "1s"}, nil)
	conn, err := net.Dial("tcp", r.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF (closed by tandem)", err)
	}
}
