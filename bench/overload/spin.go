package main

import (
	"fmt"
	"os"
	"os/exec"
)

// spinEnv marks a child of this command that only burns CPU: a crowd
// that loads the machine's cores without touching PostgreSQL, Redis or
// the service, to tell what the cores alone do to the light callers.
const spinEnv = "OVERLOAD_SPIN_CHILD"

// spinIfChild never returns in a spinning child.
func spinIfChild() {
	if os.Getenv(spinEnv) != "1" {
		return
	}
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Println(x) // keeps the loop from being optimized away
		}
	}
}

// startSpin starts n spinning children (each its own process, as
// PostgreSQL's backends are) and returns a func that kills them.
func startSpin(n int) func() {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), spinEnv+"=1", "GOMAXPROCS=1")
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		cmds = append(cmds, cmd)
	}
	return func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}
