package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// external is a proxy running in processes of its own, measured from /proc.
type external interface {
	// usage returns the CPU time of the processes that relay streams and
	// the resident memory of all of them.
	usage() (cpu time.Duration, rss int64)
}

// tandemProcess is tandem serve run from a binary as a child process.
type tandemProcess struct {
	cmd    *exec.Cmd
	url    string
	stderr *tail
	exited chan error
}

// startTandemProcess runs "binary serve" configured by env plus its own
// listen addresses, and waits until it accepts connections.
func startTandemProcess(ctx context.Context, binary string, env map[string]string) (*tandemProcess, error) {
	return startProxyProcess(ctx, binary, "serve", env)
}

// startProxyProcess runs "binary subcommand" configured by env plus
// TANDEM_LISTEN_ADDR and TANDEM_METRICS_ADDR on free loopback ports, and waits
// until it accepts connections on the first.
func startProxyProcess(ctx context.Context, binary, subcommand string, env map[string]string) (*tandemProcess, error) {
	proxyPort, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	t := &tandemProcess{url: "http://127.0.0.1:" + proxyPort, stderr: &tail{max: 4096}, exited: make(chan error, 1)}
	t.cmd = exec.Command(binary, subcommand)
	t.cmd.Env = os.Environ()
	for k, v := range env {
		t.cmd.Env = append(t.cmd.Env, k+"="+v)
	}
	t.cmd.Env = append(t.cmd.Env, "TANDEM_LISTEN_ADDR=127.0.0.1:"+proxyPort, "TANDEM_METRICS_ADDR=127.0.0.1:"+metricsPort)
	t.cmd.Stderr = t.stderr
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { t.exited <- t.cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-t.exited:
			t.exited <- err
			return nil, fmt.Errorf("%s %s exited: %v: %s", binary, subcommand, err, t.stderr)
		default:
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+proxyPort); err == nil {
			c.Close()
			return t, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			t.stop()
			return nil, errors.Join(fmt.Errorf("%s %s did not accept connections within 10s", binary, subcommand), ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (t *tandemProcess) usage() (time.Duration, int64) {
	st, err := readProcStat(t.cmd.Process.Pid)
	if err != nil {
		return 0, 0
	}
	return st.cpu, st.rss
}

// stop ends tandem as SIGTERM does in production, killing it if it has not
// exited within its shutdown grace and a margin.
func (t *tandemProcess) stop() { terminate(t.cmd, t.exited, 10*time.Second) }

// terminate sends cmd SIGTERM and waits for exited, killing the process if
// it has not exited within grace.
func terminate(cmd *exec.Cmd, exited <-chan error, grace time.Duration) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-exited
	}
}
