package fairshare

import (
	"context"
	"math"
	"time"
)

// The Queue's slots are a ceiling, not a target: a database that is
// slow while slots are free (a heavy statement, autovacuum, another
// application on the same server) serves every caller late. So the queue
// admits at most a limit of calls at once, between MinSlots and Slots,
// and moves it with the database's latency for the same work:
//
//   - Each kind of call of each identity (its work: the route) learns how
//     long it holds a connection when the queue is not busy, from the
//     calls that found a slot free at once. That is its base, an average
//     of log durations, so a call twice as slow counts as much whether it
//     took 2 ms or 2 s.
//   - Every call after that says how much slower than its base it ran.
//     Each UpdateEvery, the queue averages the recent slowdown over the
//     kinds of work seen since the last update, each kind counting once
//     (a crowd of heavy calls does not drown out the light ones).
//   - Past Tolerance the limit narrows by half the gradient, Tolerance
//     over the slowdown (so by at most a quarter per step); within it, it
//     widens by a quarter of a slot per step, back to Slots.
//
// A call runs unloaded when no more than MinSlots calls run, itself
// included; the others teach their work's base only slowly, so that a
// long overload is not learnt as the database's normal pace. A work that
// has run unloaded too seldom says nothing.
//
// The narrowed limit holds back the crowd, not a light caller: one that
// holds no slot and has used less than half of what every identity
// waiting for one has takes a slot beyond the limit, up to Slots (see
// light). So a light call does not wait for a heavy one to end.
const (
	// UpdateEvery is how often the limit moves.
	UpdateEvery = 100 * time.Millisecond
	// learnUnloaded and learnLoaded are how far a call moves its work's
	// base toward its own duration: a call that ran unloaded, and one
	// that did not.
	learnUnloaded = 0.1
	learnLoaded   = 0.0005
	// recentWeight is how far a call moves its work's recent slowdown.
	recentWeight = 0.25
	// learnedAfter is how many unloaded calls a work needs before its
	// slowdown counts.
	learnedAfter = 4
	// growBy is how far the limit widens per step.
	growBy = 0.25
)

// work is what the queue knows of one kind of call of one identity.
type work struct {
	id *identity
	// base is the mean log of seconds its calls held a connection when
	// the queue was not busy; learned counts the calls that taught it.
	base    float64
	seen    bool
	learned int
	// recent is an average of its last calls' log slowdown over base.
	recent float64
	// leaveUnloaded and leaveLoaded give back a slot of a call of this
	// work, made once.
	leaveUnloaded, leaveLoaded func(time.Duration)
}

// leaveFor is the function giving back a slot of a call of w.
func (w *work) leaveFor(unloaded bool) func(time.Duration) {
	if unloaded {
		return w.leaveUnloaded
	}
	return w.leaveLoaded
}

type workKey struct{}

// WithWork returns ctx naming the kind of work its database calls do
// (a route, say): the queue compares each call's duration with that of
// the same work when the database was not busy.
func WithWork(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, workKey{}, name)
}

func workOf(ctx context.Context) string {
	name, _ := ctx.Value(workKey{}).(string)
	return name
}

// work returns id's record of the work name, made on first use.
func (q *Queue) work(id *identity, name string) *work {
	if w, ok := id.works[name]; ok {
		return w
	}
	if id.works == nil {
		id.works = make(map[string]*work)
	}
	w := &work{id: id}
	w.leaveUnloaded = func(held time.Duration) { q.leave(w, held, true) }
	w.leaveLoaded = func(held time.Duration) { q.leave(w, held, false) }
	id.works[name] = w
	return w
}

// controller moves the Queue's limit; its fields are guarded by the
// Queue's mutex.
type controller struct {
	limit   float64
	updated time.Time
	// active are the works that ran since the last update.
	active map[*work]struct{}
	// slowdown is the last ratio measured, for the metrics.
	slowdown float64
}

// observe learns from a call of w that held a connection for held,
// unloaded or not.
func (q *Queue) observe(w *work, held time.Duration, unloaded bool) {
	if held <= 0 || !q.s.Adaptive {
		return // a call that never ran says nothing of the database
	}
	x := math.Log(held.Seconds())
	switch {
	case !w.seen, w.learned == 0 && unloaded:
		// The first unloaded call replaces a guess made from a
		// loaded one.
		w.base, w.recent = x, 0
	default:
		w.recent += (x - w.base - w.recent) * recentWeight
		rate := learnLoaded
		if unloaded {
			rate = learnUnloaded
		}
		w.base += (x - w.base) * rate
	}
	w.seen = true
	if unloaded {
		w.learned++
	}
	q.c.active[w] = struct{}{}
}

// adjust moves the limit, at most once per UpdateEvery.
func (q *Queue) adjust(now time.Time) {
	if !q.s.Adaptive || now.Sub(q.c.updated) < UpdateEvery {
		return
	}
	q.c.updated = now
	sum, n := 0.0, 0
	for w := range q.c.active {
		if w.learned >= learnedAfter {
			sum += w.recent
			n++
		}
	}
	clear(q.c.active)
	slowdown := 1.0
	if n > 0 {
		slowdown = math.Exp(sum / float64(n))
	}
	q.c.slowdown = slowdown
	limit := q.c.limit
	switch {
	case slowdown > q.s.Tolerance:
		gradient := max(q.s.Tolerance/slowdown, 0.5)
		limit *= (1 + gradient) / 2
	default:
		limit += growBy
	}
	q.c.limit = min(max(limit, float64(q.s.MinSlots)), float64(q.s.Slots))
}

// slots is how many calls the queue admits at once now.
func (q *Queue) slots() int {
	if !q.s.Adaptive {
		return q.s.Slots
	}
	return int(q.c.limit)
}

// Limit returns how many calls the queue admits at once now: Slots, or
// less while the database is slower than it is unloaded.
func (q *Queue) Limit() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.slots()
}

// Slowdown returns the latest measure of how much slower than unloaded
// the database runs the same work; 1 before there is one.
func (q *Queue) Slowdown() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.c.slowdown
}

// light reports whether id may take a slot beyond the limit, up to
// Slots: it holds none, and has used less than half of what every
// other identity waiting for one has (it would be served first anyway).
func (q *Queue) light(id *identity, now time.Time) bool {
	if !q.s.Adaptive || q.inUse >= q.s.Slots || id.held > 0 {
		return false
	}
	mine := q.load(id, now)
	for o := range q.queued {
		if o != id && q.load(o, now) <= 2*mine {
			return false
		}
	}
	return true
}
