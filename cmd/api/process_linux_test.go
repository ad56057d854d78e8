package main

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd if the test binary dies first (a
// panic or a -timeout), so that no API process outlives its test.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
