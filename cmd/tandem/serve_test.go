package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kestrelops/tandem/proxy/testupstream"
)

// serveProcess is the tandem binary running `serve`.
type serveProcess struct {
	cmd        *exec.Cmd
	proxyAddr  string
	metricsURL string
	mu         sync.Mutex
	stderr     strings.Builder
	exited     chan error
}

func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

var servingLine = regexp.MustCompile(`msg="tandem serving" proxy=(\S+) metrics=(\S+)`)

// startServe runs `tandem serve` on loopback ports with env added to the
// environment, and waits until it listens.
func startServe(t *testing.T, env map[string]string) *serveProcess {
	t.Helper()
	cmd := exec.Command(tandemBin, "serve")
	cmd.Env = append(os.Environ(), "TANDEM_LISTEN_ADDR=127.0.0.1:0", "TANDEM_METRICS_ADDR=127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, exited: make(chan error, 1)}
	listening := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m
			}
		}
		io.Copy(io.Discard, stderr)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
	})
	select {
	case m := <-listening:
		p.proxyAddr, p.metricsURL = m[1], "http://"+m[2]
	case err := <-p.exited:
		t.Fatalf("tandem serve exited before listening: %v\n%s", err, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("tandem serve never listened:\n%s", p.log())
	}
	return p
}

// wait waits for the process to exit and returns its error.
func (p *serveProcess) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-p.exited:
		return err
	case <-time.After(limit):
		t.Fatalf("tandem serve still running %v after being told to stop:\n%s", limit, p.log())
		return nil
	}
}

func upstreams(t *testing.T, prod, a, b testupstream.Script) map[string]string {
	t.Helper()
	env := map[string]string{}
	for name, s := range map[string]testupstream.Script{"PRIMARY": prod, "A": a, "B": b} {
		u := testupstream.New(s)
		t.Cleanup(u.Close)
		env["TANDEM_"+name+"_URL"] = u.URL
	}
	return env
}

const streamingChat = `{"model":"m","stream":true,"messages":[{"role":"user","content":"Say hi"}]}`

func chat(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(streamingChat))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

// TestServeSurvivesSIGHUPAndStopsOnSIGTERM: SIGHUP, fatal by default, is
// ignored with a line on stderr; SIGTERM stops tandem with status 0.
func TestServeSurvivesSIGHUPAndStopsOnSIGTERM(t *testing.T) {
	p := startServe(t, upstreams(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.log(), "SIGHUP ignored"); {
		if time.Now().After(deadline) {
			t.Fatalf("no word of SIGHUP on stderr:\n%s", p.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := chat(t, p.proxyAddr); got != testupstream.StreamBody(3) {
		t.Fatalf("after SIGHUP, production answered %q", got)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 40*time.Second); err != nil {
		t.Fatalf("tandem serve exited with %v after SIGTERM:\n%s", err, p.log())
	}
}

// TestServeStopsWithinGraceWhenStreamsOutliveIt: a production stream that
// never ends cannot hold tandem past its grace period.
func TestServeStopsWithinGraceWhenStreamsOutliveIt(t *testing.T) {
	env := upstreams(t, testupstream.Script{Hang: true}, testupstream.Script{Hang: true}, testupstream.Script{Hang: true})
	env["TANDEM_SHUTDOWN_GRACE"] = "1s"
	env["TANDEM_SAMPLE_RATE"] = "1"
	p := startServe(t, env)
	resp, err := http.Post("http://"+p.proxyAddr+"/v1/chat/completions", "application/json", strings.NewReader(streamingChat))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 15*time.Second); err != nil {
		t.Fatalf("tandem serve exited with %v:\n%s", err, p.log())
	}
}
