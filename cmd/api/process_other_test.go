//go:build !linux

package main

import "os/exec"

// dieWithTest is a no-op where the kernel cannot tie a child's life to
// its parent's; t.Cleanup still stops the process.
func dieWithTest(*exec.Cmd) {}
