package serve

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// nginxPath is Debian's nginx, which .ci/run installs.
const nginxPath = "/usr/sbin/nginx"

// startNginx runs nginx on a free loopback port in front of production,
// mirroring every request to mirrorAddr (host:port) when it is not empty.
// It returns nginx's base URL.
func startNginx(t *testing.T, production, mirrorAddr string) string {
	t.Helper()
	if _, err := os.Stat(nginxPath); err != nil {
		t.Fatalf("nginx is not installed (%v); .ci/run installs it", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	mirror := ""
	if mirrorAddr != "" {
		// The mirror's subrequest goes to tandem; its answer is discarded.
		mirror = `mirror /_tandem;
            mirror_request_body on;`
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen %[2]s;
        location / {
            %[3]s
            proxy_pass %[4]s;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
        location = /_tandem {
            internal;
            proxy_pass http://%[5]s$request_uri;
            proxy_http_version 1.1;
            proxy_connect_timeout 1s;
            proxy_read_timeout 2s;
        }
    }
}
`, dir, addr, mirror, production, cmp(mirrorAddr, "127.0.0.1:1"))
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginxPath, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx never listened on %s: %v\n%s", addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cmp(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// chatThrough posts n distinct streaming chats to base concurrently and
// returns the answers.
func chatThrough(t *testing.T, base string, n int) []string {
	t.Helper()
	answers := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"tap %d"}]}`, i)
			resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("request %d: status %d, %v", i, resp.StatusCode, err)
			}
			answers[i] = string(got)
		})
	}
	wg.Wait()
	return answers
}

// TestTapBehindNginxMirror: nginx in front of production mirrors every
// request to tandem in tap mode. Clients get production's answers byte for
// byte, with or without the mirror, whether the arms answer, hang, or
// tandem is down; tandem pairs every copy it receives.
func TestTapBehindNginxMirror(t *testing.T) {
	const n = 20
	want := testupstream.StreamBody(3)
	prod := testupstream.New(testupstream.Script{})
	t.Cleanup(prod.Close)

	t.Run("without the mirror", func(t *testing.T) {
		for i, got := range chatThrough(t, startNginx(t, prod.URL, ""), n) {
			if got != want {
				t.Errorf("request %d: answer %q", i, got)
			}
		}
	})

	for _, tc := range []struct {
		name string
		arm  testupstream.Script
	}{
		{"arms answering", testupstream.Script{}},
		{"arms hanging", testupstream.Script{Hang: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := testupstream.New(tc.arm), testupstream.New(tc.arm)
			t.Cleanup(a.Close)
			t.Cleanup(b.Close)
			prod.Forget()
			r := startWith(t, "", a, b, map[string]string{"TANDEM_MODE": "tap", "TANDEM_SHADOW_TIMEOUT": "3s"}, nil)
			for i, got := range chatThrough(t, startNginx(t, prod.URL, r.proxyAddr), n) {
				if got != want {
					t.Errorf("request %d: answer %q, want production's", i, got)
				}
			}
			if got := len(prod.Received()); got != n {
				t.Errorf("production received %d requests, want %d", got, n)
			}
			copies := func(u *testupstream.Server) int { // tandem's start-up check is a GET
				n := 0
				for _, rec := range u.Received() {
					if rec.Method == http.MethodPost {
						n++
					}
				}
				return n
			}
			for arm, u := range map[string]*testupstream.Server{"A": a, "B": b} {
				for deadline := time.Now().Add(10 * time.Second); copies(u) < n && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				if got := copies(u); got != n {
					t.Errorf("%s received %d copies, want %d", arm, got, n)
				}
			}
			r.cancel()
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			outcomes := r.outcomes(t)
			if len(outcomes[exporter.ConfigProduction]) != 0 {
				t.Errorf("tap mode recorded production: %v", outcomes[exporter.ConfigProduction])
			}
			for _, arm := range exporter.Arms {
				if got := len(outcomes[arm]); got != n {
					t.Errorf("%s recorded %d requests, want %d", arm, got, n)
				}
			}
		})
	}

	t.Run("tandem down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		down := ln.Addr().String()
		ln.Close()
		for i, got := range chatThrough(t, startNginx(t, prod.URL, down), n) {
			if got != want {
				t.Errorf("request %d: answer %q, want production's", i, got)
			}
		}
	})
}
