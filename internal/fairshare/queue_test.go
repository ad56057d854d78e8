package fairshare

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/apperr"
)

// clock is a time the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newQueue returns a Queue on a clock that moves only when told to.
func newQueue(t *testing.T, s Settings) (*Queue, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1_000_000, 0)}
	q := New(s)
	q.now = c.now
	return q, c
}

func as(id string, weight int) context.Context {
	return WithCaller(context.Background(), id, weight)
}

// use charges ctx's caller held, as a call that held a slot that long.
func use(t *testing.T, q *Queue, ctx context.Context, held time.Duration) {
	t.Helper()
	leave, err := q.Enter(ctx)
	if err != nil {
		t.Fatalf("Enter() = %v with a free slot", err)
	}
	leave(held)
}

// entry is the outcome of an Enter made in the background.
type entry struct {
	name  string
	leave func(time.Duration)
	err   error
}

// enterLater starts Enter for ctx and waits until it is queued (the queue
// holds one more waiter); its outcome goes to out.
func enterLater(t *testing.T, q *Queue, ctx context.Context, name string, out chan<- entry) {
	t.Helper()
	before := q.Waiting()
	go func() {
		leave, err := q.Enter(ctx)
		out <- entry{name, leave, err}
	}()
	waitFor(t, func() bool { return q.Waiting() > before }, "a waiter queued")
}

// waitFor polls cond until it holds; the test fails after 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// admissionOrder holds the only slot, queues calls as listed, then lets
// them through one at a time (each charged held) and returns the order in
// which they got the slot.
func admissionOrder(t *testing.T, q *Queue, held time.Duration, calls []call) []string {
	t.Helper()
	out := make(chan entry, len(calls))
	blocker, err := q.Enter(as("blocker", 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		enterLater(t, q, c.ctx, c.name, out)
	}
	blocker(held)
	var got []string
	for range calls {
		e := <-out
		if e.err != nil {
			t.Fatalf("%s: Enter() = %v", e.name, e.err)
		}
		got = append(got, e.name)
		e.leave(held)
	}
	return got
}

type call struct {
	name string
	ctx  context.Context
}

func TestAdmissionOrder(t *testing.T) {
	tests := []struct {
		name string
		// used is what each identity has used before (weight 1 unless
		// named in weights).
		used    map[string]time.Duration
		weights map[string]int
		calls   []string // identity of each call, in arrival order
		want    []string
	}{
		{
			name:  "LightBeforeHeavy",
			used:  map[string]time.Duration{"heavy": time.Second, "light": 10 * time.Millisecond},
			calls: []string{"heavy", "heavy", "light"},
			want:  []string{"light", "heavy", "heavy"},
		},
		{
			name:  "NewcomerFirst",
			used:  map[string]time.Duration{"heavy": 100 * time.Millisecond},
			calls: []string{"heavy", "new"},
			want:  []string{"new", "heavy"},
		},
		{
			name:    "WeightDividesUse",
			used:    map[string]time.Duration{"gold": 300 * time.Millisecond, "free": 100 * time.Millisecond},
			weights: map[string]int{"gold": 4},
			calls:   []string{"free", "gold"},
			want:    []string{"gold", "free"},
		},
		{
			name:  "EqualTakeTurns",
			calls: []string{"a", "a", "a", "b", "b", "b"},
			want:  []string{"a", "b", "a", "b", "a", "b"},
		},
		{
			name:    "TurnsByWeight",
			weights: map[string]int{"a": 2},
			calls:   []string{"a", "a", "a", "a", "b", "b", "b"},
			want:    []string{"a", "b", "a", "a", "b", "a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := newQueue(t, Settings{Slots: 1, MaxWait: time.Hour})
			weight := func(id string) int { return max(tt.weights[id], 1) }
			for id, d := range tt.used {
				use(t, q, as(id, weight(id)), d)
			}
			var calls []call
			for _, id := range tt.calls {
				calls = append(calls, call{id, as(id, weight(id))})
			}
			got := admissionOrder(t, q, 10*time.Millisecond, calls)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("admission order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFreeSlotAtOnce(t *testing.T) {
	q, _ := newQueue(t, Settings{Slots: 2})
	a, err := q.Enter(as("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := q.InUse(); got != 2 {
		t.Errorf("InUse() = %d after two Enter, want 2", got)
	}
	a(time.Millisecond)
	b(time.Millisecond)
	if got, want := [2]int{q.InUse(), q.Waiting()}, [2]int{0, 0}; got != want {
		t.Errorf("InUse(), Waiting() = %v after both left, want %v", got, want)
	}
}

func TestAnonymousCallersShareOneIdentity(t *testing.T) {
	q, _ := newQueue(t, Settings{Slots: 1, MaxWait: time.Hour})
	use(t, q, context.Background(), time.Second)
	// A second anonymous request comes after a named one: it carries the
	// first one's use.
	got := admissionOrder(t, q, time.Millisecond, []call{
		{"anonymous", context.Background()}, {"named", as("named", 1)},
	})
	if diff := cmp.Diff([]string{"named", "anonymous"}, got); diff != "" {
		t.Errorf("admission order (-want +got):\n%s", diff)
	}
}

func TestUseFades(t *testing.T) {
	q, clk := newQueue(t, Settings{Slots: 1, MaxWait: time.Hour, HalfLife: time.Second})
	use(t, q, as("old", 1), time.Second)
	clk.advance(10 * time.Second) // ten half-lives: a second counts a millisecond
	use(t, q, as("recent", 1), 10*time.Millisecond)
	q.mu.Lock()
	load := q.load(q.ids["old"], q.now())
	q.mu.Unlock()
	if want := time.Second.Seconds() / 1024; load < want*0.99 || load > want*1.01 {
		t.Errorf("load of 1 s used ten half-lives ago = %g s, want %g", load, want)
	}
	got := admissionOrder(t, q, time.Millisecond, []call{
		{"recent", as("recent", 1)}, {"old", as("old", 1)},
	})
	if diff := cmp.Diff([]string{"old", "recent"}, got); diff != "" {
		t.Errorf("admission order (-want +got):\n%s", diff)
	}
}

func TestForgetsIdleIdentities(t *testing.T) {
	q, clk := newQueue(t, Settings{Slots: 1, HalfLife: time.Second})
	use(t, q, as("gone", 1), 100*time.Millisecond)
	clk.advance(time.Minute)
	use(t, q, as("here", 1), 100*time.Millisecond)
	q.mu.Lock()
	_, gone := q.ids["gone"]
	_, here := q.ids["here"]
	q.mu.Unlock()
	if gone || !here {
		t.Errorf("after a minute idle: remembered gone %v, here %v; want false, true", gone, here)
	}
}

// refused checks that e was turned away as the heaviest caller's.
func refused(t *testing.T, e entry, wantName string) {
	t.Helper()
	var ae *apperr.Error
	if e.name != wantName || !errors.As(e.err, &ae) || ae.Kind != apperr.Reduced {
		t.Fatalf("turned away %s with %v, want %s with a Reduced error", e.name, e.err, wantName)
	}
	if ae.RetryAfter < time.Second || !cmp.Equal(ae.Limits, []string{Policy}) {
		t.Errorf("refusal RetryAfter %v, Limits %v; want at least 1s and [%s]", ae.RetryAfter, ae.Limits, Policy)
	}
}

func TestShedsTheHeaviest(t *testing.T) {
	tests := []struct {
		name     string
		settings Settings
		// hold is what every call is charged: it sets how many the slot
		// serves within MaxWait.
		hold     time.Duration
		arrivals []string // the callers queued; the last overflows
		want     string   // the call turned away, named identity#n
	}{
		// The queue holds 3: a light call arriving last turns the
		// heaviest's newest away, not itself.
		{"FullLightArrives", Settings{Slots: 1, MaxQueue: 3, MaxWait: time.Hour}, time.Millisecond,
			[]string{"heavy", "heavy", "light", "light"}, "heavy#2"},
		// A heavy call arriving last is the heaviest's newest itself.
		{"FullHeavyArrives", Settings{Slots: 1, MaxQueue: 3, MaxWait: time.Hour}, time.Millisecond,
			[]string{"heavy", "light", "light", "heavy"}, "heavy#2"},
		// Calls hold the slot 20 s, so one slot serves three within a
		// minute: a fourth is one too many.
		{"Overload", Settings{Slots: 1, MaxWait: time.Minute}, 20 * time.Second,
			[]string{"heavy", "light", "light", "light"}, "heavy#1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := newQueue(t, tt.settings)
			use(t, q, as("heavy", 1), 100*tt.hold)
			use(t, q, as("light", 1), tt.hold)
			q.mu.Lock()
			q.avgHold = tt.hold.Seconds()
			q.mu.Unlock()
			blocker, err := q.Enter(as("blocker", 1))
			if err != nil {
				t.Fatal(err)
			}
			out := make(chan entry, len(tt.arrivals))
			n := map[string]int{}
			for _, id := range tt.arrivals[:len(tt.arrivals)-1] {
				n[id]++
				enterLater(t, q, as(id, 1), id+"#"+string(rune('0'+n[id])), out)
			}
			last := tt.arrivals[len(tt.arrivals)-1]
			n[last]++
			go func() {
				leave, err := q.Enter(as(last, 1))
				out <- entry{last + "#" + string(rune('0'+n[last])), leave, err}
			}()
			refused(t, <-out, tt.want)
			blocker(tt.hold)
			for range len(tt.arrivals) - 1 {
				e := <-out
				if e.err != nil {
					t.Fatalf("%s: Enter() = %v, want a slot", e.name, e.err)
				}
				e.leave(tt.hold)
			}
		})
	}
}

func TestWaitIsBounded(t *testing.T) {
	q := New(Settings{Slots: 1, MaxWait: 20 * time.Millisecond})
	leave, err := q.Enter(as("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer leave(0)
	_, err = q.Enter(as("b", 1))
	if apperr.KindOf(err) != apperr.Reduced {
		t.Errorf("Enter() with the slot held past MaxWait = %v, want a Reduced error", err)
	}
	if got := q.Waiting(); got != 0 {
		t.Errorf("Waiting() = %d after the wait ended, want 0", got)
	}
}

func TestCallerLeavesWhileWaiting(t *testing.T) {
	q := New(Settings{Slots: 1, MaxWait: time.Hour})
	leave, err := q.Enter(as("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(as("b", 1))
	out := make(chan entry, 1)
	enterLater(t, q, ctx, "b", out)
	cancel()
	if e := <-out; !errors.Is(e.err, context.Canceled) {
		t.Errorf("Enter() whose context ended = %v, want context.Canceled", e.err)
	}
	leave(0)
	if got := [2]int{q.Waiting(), q.InUse()}; got != [2]int{0, 0} {
		t.Errorf("Waiting(), InUse() = %v, want [0 0]: the slot came back", got)
	}
}

// TestConcurrentCallers checks the bookkeeping under real contention:
// every slot given is given back, and no more than Slots are held at once.
func TestConcurrentCallers(t *testing.T) {
	const slots = 3
	q := New(Settings{Slots: slots, MaxWait: time.Minute})
	var mu sync.Mutex
	inUse, most := 0, 0
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := as(string(rune('a'+i%5)), 1+i%3)
			for range 50 {
				leave, err := q.Enter(ctx)
				if err != nil {
					continue // turned away under contention; allowed
				}
				mu.Lock()
				inUse++
				most = max(most, inUse)
				mu.Unlock()
				time.Sleep(10 * time.Microsecond)
				mu.Lock()
				inUse--
				mu.Unlock()
				leave(10 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if most > slots {
		t.Errorf("%d calls held slots at once, want at most %d", most, slots)
	}
	if got := [2]int{q.Waiting(), q.InUse()}; got != [2]int{0, 0} {
		t.Errorf("Waiting(), InUse() = %v at the end, want [0 0]", got)
	}
}

func TestWeight(t *testing.T) {
	s := Settings{Weights: map[string]int{"gold": 4, "silver": 2}}
	for _, tt := range []struct {
		tier string
		want int
	}{{"gold", 4}, {"silver", 2}, {"", 1}, {"bronze", 1}} {
		if got := s.Weight(tt.tier); got != tt.want {
			t.Errorf("Weight(%q) = %d, want %d", tt.tier, got, tt.want)
		}
	}
}

func BenchmarkEnterFree(b *testing.B) {
	q := New(Settings{Slots: 1 << 20})
	b.RunParallel(func(pb *testing.PB) {
		ctx := as("bench", 1)
		for pb.Next() {
			leave, err := q.Enter(ctx)
			if err != nil {
				b.Fatal(err)
			}
			leave(time.Microsecond)
		}
	})
}

// TestBusy: the queue is busy once its slots are held, until they are
// given back.
func TestBusy(t *testing.T) {
	q := New(Settings{Slots: 2, MaxWait: time.Hour})
	if q.Busy() {
		t.Fatal("Busy() with nothing running")
	}
	a, _ := q.Enter(as("a", 1))
	if q.Busy() {
		t.Error("Busy() with one of two slots held")
	}
	b, _ := q.Enter(as("b", 1))
	if !q.Busy() {
		t.Error("not Busy() with both slots held")
	}
	out := make(chan entry, 1)
	enterLater(t, q, as("c", 1), "c", out)
	a(0)
	c := <-out
	if !q.Busy() {
		t.Error("not Busy() with both slots held again")
	}
	b(0)
	c.leave(0)
	if q.Busy() {
		t.Error("Busy() once every caller left")
	}
}
