package deploy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// containerTempDir is os.TempDir in tandem's image: distroless sets no
// TMPDIR.
const containerTempDir = "/tmp"

// imageUser is the Dockerfile's USER.
const imageUser = 65532

// TestComposeTandemRuns runs the compose file's tandem command with the
// binary the Dockerfile builds, as far as this machine can stand in for
// the container: the image's user, a read-only working directory, and the
// compose tmpfs as the only writable directory (TMPDIR points there, as
// /tmp is in the container). It must start, serve the status page and
// /metrics, and keep its records in the tmpfs. Without the tmpfs (TMPDIR
// read-only too) it cannot start. Only the listen addresses change, to
// free loopback ports.
func TestComposeTandemRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tandem")
	}
	var c struct {
		Name     string                    `yaml:"name"`
		Services map[string]composeService `yaml:"services"`
	}
	decodeYAMLStrict(t, filepath.Join("compose", "compose.yaml"), &c)
	tandem := c.Services["tandem"]
	if !tandem.ReadOnly {
		t.Error("tandem's root file system is not read-only")
	}
	if _, ok := tandem.Environment["TMPDIR"]; ok {
		t.Errorf("tandem sets TMPDIR; the test assumes the image's %s", containerTempDir)
	}
	if !slices.ContainsFunc(tandem.Tmpfs, func(m string) bool { return strings.Split(m, ":")[0] == containerTempDir }) {
		t.Fatalf("tandem's tmpfs %v lacks %s, where the demo writes its records", tandem.Tmpfs, containerTempDir)
	}

	root := dirFor(t, 0o755)
	bin := filepath.Join(root, "tandem")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/tandem")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	readOnly := dirFor(t, 0o555)
	tmpfs := dirFor(t, 0o777|os.ModeSticky)

	args := slices.Clone(tandem.Command)
	for i, a := range args[:len(args)-1] {
		if a == "--listen-addr" || a == "--metrics-addr" {
			args[i+1] = "127.0.0.1:0"
		}
	}
	run := func(tmpdir string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = readOnly
		cmd.Env = []string{"TMPDIR=" + tmpdir}
		for k, v := range tandem.Environment {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUser, Gid: imageUser}}
		}
		stderr := &strings.Builder{}
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, bufio.NewReader(out), stderr
	}

	// Without the tmpfs: the container as it was.
	cmd, out, stderr := run(readOnly)
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err == nil {
		t.Error("tandem demo started without a writable temporary directory")
	} else {
		t.Logf("without the tmpfs: %v: %s", err, strings.TrimSpace(stderr.String()))
	}

	cmd, out, stderr = run(tmpfs)
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Error("tandem demo did not end within 30s of an interrupt")
		}
	}()
	metricsAddr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`status page: http://([^/]+)/`)
		for {
			line, err := out.ReadString('\n')
			if m := re.FindStringSubmatch(line); m != nil {
				metricsAddr <- m[1]
			}
			if err != nil {
				return
			}
		}
	}()
	var addr string
	select {
	case addr = <-metricsAddr:
	case <-time.After(60 * time.Second):
		t.Fatalf("tandem demo did not start within 60s: %s", stderr.String())
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/metrics", "/-/healthy"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if path == "/metrics" && !strings.Contains(string(body), "tandem_build_info") {
			t.Error("/metrics lacks tandem_build_info")
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmpfs, "tandem-demo-*")); len(dirs) != 1 {
		t.Errorf("records directories in the tmpfs: %v, want one", dirs)
	}
}

// dirFor is a new directory with mode perm, which the image's user can
// reach, removed at the end of the test.
func dirFor(t *testing.T, perm os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tandem-compose-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755); os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}
