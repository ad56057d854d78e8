package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// apiProcessEnv marks a re-executed test binary as an API process:
// TestMain runs main in it instead of the tests.
const apiProcessEnv = "GEOGATE_API_PROCESS"

// apiProcess is the service running as a separate OS process: this test
// binary re-executed to run main, so that it is built with the same flags
// (-race included) as the tests that drive it.
type apiProcess struct {
	base string // http://127.0.0.1:port, known once waitHealthy returns
	addr string // 127.0.0.1:port
	env  map[string]string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{} // closed once the process has exited
	err  error         // cmd.Wait's result, set before done closes
}

// launchProcess starts the service as a child process with env as its
// whole configuration (plus PORT=0: it picks a free port and prints it)
// and returns at once; call waitHealthy before using it. When the test ends the process still
// running gets SIGTERM and must exit with status 0.
func launchProcess(t *testing.T, env map[string]string) *apiProcess {
	t.Helper()
	p := &apiProcess{env: env}
	p.launch(t)
	t.Cleanup(func() {
		select {
		case <-p.done:
			return // the test ended it and checked how
		default:
		}
		code, err := p.stop(15 * time.Second)
		if err != nil || code != 0 {
			t.Errorf("API process %s after SIGTERM: exit status %d, %v; want 0\nlogs (tail):\n%s", p.addr, code, err, tail(p.logs.String(), 3000))
		}
	})
	return p
}

// launch starts the process.
func (p *apiProcess) launch(t *testing.T) {
	t.Helper()
	p.logs = &syncBuffer{}
	p.done = make(chan struct{})
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = []string{apiProcessEnv + "=1", "PORT=0"}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			p.cmd.Env = append(p.cmd.Env, k+"="+v)
		}
	}
	// Under -race the runtime sleeps a second before exiting, which the
	// api binary does not: the shutdown tests time the exit.
	p.cmd.Env = append(p.cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	for k, v := range p.env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start an API process: %v", err)
	}
	cmd, done := p.cmd, p.done
	go func() {
		err := cmd.Wait()
		p.err = err
		close(done)
	}()
}

// startProcess is launchProcess followed by waitHealthy.
func startProcess(t *testing.T, env map[string]string) *apiProcess {
	t.Helper()
	p := launchProcess(t, env)
	p.waitHealthy(t)
	return p
}

// waitHealthy waits until the process prints the URL it listens on and
// answers /healthz there with 200, and fails the test if it exits first or
// takes more than 30s.
func (p *apiProcess) waitHealthy(t *testing.T) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "the API process printing its URL", func() bool {
		select {
		case <-p.done:
			t.Fatalf("API process exited early: %v\nlogs:\n%s", p.err, tail(p.logs.String(), 4000))
		default:
		}
		p.base = announced(p.logs.String(), listeningPrefix)
		return p.base != ""
	})
	p.addr = strings.TrimPrefix(p.base, "http://")
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(p.base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/healthz = %v, %v; want 200\nlogs:\n%s", p.base, resp, err, tail(p.logs.String(), 4000))
	}
	resp.Body.Close()
}

// signal sends sig to the process.
func (p *apiProcess) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// wait waits up to timeout for the process to exit and returns its exit
// status. An error means it did not exit in time, or was killed by a
// signal.
func (p *apiProcess) wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return -1, fmt.Errorf("still running %v later", timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, fmt.Errorf("killed by %v", ws.Signal())
		}
		return ee.ExitCode(), nil
	}
	if p.err != nil {
		return -1, p.err
	}
	return 0, nil
}

// stop sends SIGTERM and waits up to timeout for the exit status; a
// process still running then is killed.
func (p *apiProcess) stop(timeout time.Duration) (int, error) {
	if err := p.signal(syscall.SIGTERM); err != nil {
		select {
		case <-p.done: // it had exited already
			return p.wait(0)
		default:
			return -1, err
		}
	}
	code, err := p.wait(timeout)
	if err != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return code, err
}
