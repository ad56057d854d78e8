package testenv

import (
	osexec "os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd if the test binary dies first
// (a panic or a -timeout), so no server outlives its tests.
func dieWithParent(cmd *osexec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
