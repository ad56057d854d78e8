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
)

// apiProcessEnv marks a re-executed test binary as an API process.
const apiProcessEnv = "GEOGATE_API_PROCESS"

// TestAPIProcess is the body of a process started by launchProcess: it
// runs main as the api binary does (signals, settings from the
// environment, exit status). On its own it does nothing.
func TestAPIProcess(t *testing.T) {
	if os.Getenv(apiProcessEnv) != "1" {
		return
	}
	os.Args = os.Args[:1]
	main()
}

// apiProcess is the service running as a separate OS process: this test
// binary re-executed to run main, so that it is built with the same flags
// (-race included) as the tests that drive it.
type apiProcess struct {
	base     string // http://127.0.0.1:port
	addr     string // 127.0.0.1:port
	env      map[string]string
	attempts int // launches so far, the current one included
	cmd      *exec.Cmd
	logs     *syncBuffer
	done     chan struct{} // closed once the process has exited
	err      error         // cmd.Wait's result, set before done closes
}

// maxLaunches bounds how often waitHealthy relaunches a process that lost
// its port to another process between freePort and its own listen.
const maxLaunches = 4

// launchProcess starts the service as a child process with env as its
// whole configuration (plus PORT, a free port) and returns at once; call
// waitHealthy before using it. When the test ends the process still
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

// launch starts the process on a port free a moment ago. Another process
// may bind that port before the child does: waitHealthy then launches
// again, on a new port.
func (p *apiProcess) launch(t *testing.T) {
	t.Helper()
	port := freePort(t)
	p.attempts++
	p.base = fmt.Sprintf("http://127.0.0.1:%d", port)
	p.addr = fmt.Sprintf("127.0.0.1:%d", port)
	p.logs = &syncBuffer{}
	p.done = make(chan struct{})
	p.err = nil
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestAPIProcess$", "-test.count=1")
	p.cmd.Env = []string{apiProcessEnv + "=1", "PORT=" + fmt.Sprint(port)}
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

// waitHealthy waits until the process answers /healthz with 200, and
// fails the test if it exits first or takes more than 30s. A process that
// exits because its port was taken is launched again on another.
func (p *apiProcess) waitHealthy(t *testing.T) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			logs := p.logs.String()
			if strings.Contains(logs, "address already in use") && p.attempts < maxLaunches {
				t.Logf("API process %s lost its port, launching it again: %v\n%s", p.addr, p.err, tail(logs, 1000))
				p.launch(t)
				continue
			}
			t.Fatalf("API process %s exited early: %v\nlogs:\n%s", p.addr, p.err, tail(logs, 4000))
		default:
		}
		if resp, err := client.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("API process %s did not answer /healthz within 30s; logs:\n%s", p.addr, tail(p.logs.String(), 4000))
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
