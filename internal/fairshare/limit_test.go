package fairshare

import (
	"testing"
	"time"
)

// useAfterWait charges ctx's caller held as a call that waited for its
// slot: such calls tell the controller how the busy database performs.
func useAfterWait(t *testing.T, q *Queue, name string, held time.Duration) {
	t.Helper()
	if _, err := q.Enter(WithWork(as(name, 1), "GET /within")); err != nil {
		t.Fatalf("Enter() = %v with a free slot", err)
	}
	q.mu.Lock()
	w := q.work(q.ids[name], "GET /within")
	q.mu.Unlock()
	w.leaveLoaded(held)
}

// run makes calls of held, one every 10 ms of the clock, for d.
func run(t *testing.T, q *Queue, c *clock, d, held time.Duration, waited bool) {
	t.Helper()
	for range d / (10 * time.Millisecond) {
		if waited {
			useAfterWait(t, q, "a", held)
		} else {
			use(t, q, WithWork(as("a", 1), "GET /within"), held)
		}
		c.advance(10 * time.Millisecond)
	}
}

func TestLimitFollowsTheSlowdown(t *testing.T) {
	q, c := newQueue(t, Settings{Slots: 8, Adaptive: true, MinSlots: 2, Tolerance: 1.5})
	steps := []struct {
		name      string
		held      time.Duration
		waited    bool
		wantLimit int
	}{
		{"unloaded, learning", 10 * time.Millisecond, false, 8},
		{"four times slower", 40 * time.Millisecond, true, 2},
		{"back to its pace", 10 * time.Millisecond, true, 8},
		{"slower within tolerance", 14 * time.Millisecond, true, 8},
	}
	for _, s := range steps {
		run(t, q, c, 3*time.Second, s.held, s.waited)
		if got := q.Limit(); got != s.wantLimit {
			t.Errorf("%s: Limit() = %d, want %d (slowdown %.2f)", s.name, got, s.wantLimit, q.Slowdown())
		}
	}
}

// narrowed returns a queue of 4 slots whose work, after a second at its
// unloaded pace, ran ten times slower for three: its limit is down to 1.
func narrowed(t *testing.T) *Queue {
	t.Helper()
	q, c := newQueue(t, Settings{Slots: 4, Adaptive: true, MinSlots: 1, Tolerance: 1.5})
	run(t, q, c, time.Second, 10*time.Millisecond, false)
	run(t, q, c, 3*time.Second, 100*time.Millisecond, true)
	if got := q.Limit(); got != 1 {
		t.Fatalf("Limit() = %d after a tenfold slowdown, want 1", got)
	}
	return q
}

func TestNarrowedLimitQueuesCalls(t *testing.T) {
	q := narrowed(t)
	leave, err := q.Enter(as("b", 1))
	if err != nil {
		t.Fatal(err)
	}
	// b's second call waits: b holds the one slot, so is no light
	// caller to let past the limit.
	out := make(chan entry, 1)
	enterLater(t, q, as("b", 1), "b", out)
	leave(time.Millisecond)
	if e := <-out; e.err != nil {
		t.Fatalf("the waiting call: %v, want the slot given back", e.err)
	}
}

func TestFixedSlotsWithoutAdaptive(t *testing.T) {
	q, c := newQueue(t, Settings{Slots: 8})
	run(t, q, c, time.Second, 10*time.Millisecond, false)
	run(t, q, c, 3*time.Second, 100*time.Millisecond, true)
	if got := q.Limit(); got != 8 {
		t.Errorf("Limit() = %d, want the 8 slots", got)
	}
}

func TestLightCallerPassesTheNarrowedLimit(t *testing.T) {
	q := narrowed(t)
	// "a" has used seconds of database time and holds the one slot.
	leaveA, err := q.Enter(as("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	// A newcomer has used none: it passes the limit at once.
	leaveNew, err := q.Enter(as("new", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := q.InUse(); got != 2 {
		t.Errorf("a light newcomer: %d slots in use, want 2", got)
	}
	// One call at a time: its second waits like anyone's.
	out := make(chan entry, 1)
	enterLater(t, q, as("new", 1), "new", out)
	leaveNew(time.Millisecond)
	leaveA(time.Millisecond)
	if e := <-out; e.err != nil {
		t.Fatalf("the second call: %v, want a slot", e.err)
	} else {
		e.leave(time.Millisecond)
	}
}
