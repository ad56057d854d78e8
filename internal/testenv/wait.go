package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds and fails the test when it still does
// not after within: tests wait for the event they need (a log line, a
// connection count, a state change), never for a fixed time.
func WaitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not after %v", what, within)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for an event
	}
}
