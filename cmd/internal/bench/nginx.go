package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// nginx is an nginx reverse proxy started by the benchmark in front of one
// upstream, configured for streaming: no buffering, HTTP/1.1 keep-alive to
// the upstream.
type nginx struct {
	cmd     *exec.Cmd
	dir     string
	url     string
	version string
	workers []int
	exited  chan error
}

// nginxConf is the configuration template. Every path nginx writes is in
// the temporary directory.
var nginxConf = template.Must(template.New("nginx.conf").Parse(`daemon off;
master_process on;
worker_processes {{.Workers}};
worker_rlimit_nofile {{.Files}};
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
{{if .User}}user {{.User}};
{{end}}
events {
    worker_connections {{.Connections}};
}

http {
    access_log off;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    fastcgi_temp_path {{.Dir}}/fastcgi;
    uwsgi_temp_path {{.Dir}}/uwsgi;
    scgi_temp_path {{.Dir}}/scgi;
    keepalive_requests 100000;

    upstream engine {
        server {{.Upstream}};
        keepalive 256;
    }
{{if .Mirror}}
    upstream tandem {
        server {{.Mirror}};
        keepalive 256;
    }
{{end}}
    server {
        listen {{.Listen}} backlog=4096;
        location / {
{{if .Mirror}}            mirror /_tandem;
            mirror_request_body on;
{{end}}            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }
{{if .Mirror}}        location = /_tandem {
            internal;
            proxy_pass http://tandem$request_uri;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 1s;
            proxy_read_timeout 2s;
        }
{{end}}    }
}
`))

// startNginx runs the nginx binary at path in front of upstreamAddr
// (host:port), able to hold streams concurrent streams. When mirrorAddr
// (host:port) is not empty, nginx mirrors every request, body included, to
// it, as a gateway in front of tandem in tap mode does; the mirror's answers
// are discarded.
func startNginx(ctx context.Context, path, upstreamAddr, mirrorAddr string, streams int) (*nginx, error) {
	out, err := exec.CommandContext(ctx, path, "-v").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s -v: %w: %s", path, err, out)
	}
	dir, err := os.MkdirTemp("", "tandem-bench-nginx-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "root"
	}
	// Each stream is two connections, to the client and to the upstream,
	// and a third to the mirror when there is one.
	connections := 3*streams + 1024
	vars := map[string]any{
		"Dir": dir, "User": user, "Upstream": upstreamAddr, "Mirror": mirrorAddr, "Listen": "127.0.0.1:" + port,
		"Connections": connections, "Files": connections + 1024, "Workers": runtime.GOMAXPROCS(0),
	}
	var conf strings.Builder
	if err := nginxConf.Execute(&conf, vars); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf.String()), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	n := &nginx{
		dir:     dir,
		url:     "http://127.0.0.1:" + port,
		version: strings.TrimSpace(strings.TrimPrefix(string(out), "nginx version: ")),
		exited:  make(chan error, 1),
	}
	n.cmd = exec.Command(path, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	n.cmd.Stderr = &tail{max: 4096}
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { n.exited <- n.cmd.Wait() }()
	if err := n.waitReady(ctx); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// waitReady waits until nginx accepts connections and all its workers
// (one per processor tandem may use) run.
func (n *nginx) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	addr := strings.TrimPrefix(n.url, "http://")
	for {
		select {
		case err := <-n.exited:
			n.exited <- err
			errLog, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
			return fmt.Errorf("nginx exited: %v: %s%s", err, n.cmd.Stderr, errLog)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			if n.workers = children(n.cmd.Process.Pid); len(n.workers) == runtime.GOMAXPROCS(0) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("nginx did not accept connections within 10s")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// usage returns the CPU time of nginx's workers and the resident memory of
// the master and its workers.
func (n *nginx) usage() (cpu time.Duration, rss int64) {
	for _, pid := range append([]int{n.cmd.Process.Pid}, n.workers...) {
		st, err := readProcStat(pid)
		if err != nil {
			continue
		}
		if pid != n.cmd.Process.Pid {
			cpu += st.cpu
		}
		rss += st.rss
	}
	return cpu, rss
}

// stop ends nginx (fast shutdown) and removes its directory.
func (n *nginx) stop() {
	terminate(n.cmd, n.exited, 5*time.Second)
	os.RemoveAll(n.dir)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }
