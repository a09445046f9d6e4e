// Package redistest runs Debian's redis-server on a loopback port for tests.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Binary is where Debian's redis-server package installs the server.
const Binary = "/usr/bin/redis-server"

// Server is one redis-server process on a loopback port.
type Server struct {
	t    testing.TB
	dir  string
	Port int
	cmd  *exec.Cmd
}

// Start runs redis-server on a free loopback port, without persistence, and
// stops it when the test ends. The test fails when redis-server is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Fatalf("%s is missing: install Debian's redis-server package (.ci/run does)", Binary)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{t: t, dir: t.TempDir(), Port: port}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Restart starts the server again on the same port, empty, after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = exec.Command(Binary, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no",
		"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "Ready to accept connections") {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.t.Fatalf("redis-server did not start on port %d", s.Port)
	}
}

// Stop kills the server, as a crash would, and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}
