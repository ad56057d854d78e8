// Package fairshare shares the database among the callers waiting for it
// when it is busy. Every database call enters a Queue of a fixed number of
// slots first. While a slot is free, a call takes it at once. When none
// is, the call waits with the other calls of its identity, and each slot
// given back goes to the waiting identity that has used the least
// database time for its weight, past use fading with a half-life. When
// more wait than can be served within the longest wait allowed, the
// heaviest identity's calls are turned away first.
package fairshare

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/geogate/geogate/internal/apperr"
)

// Policy is the name a refusal gives in its violated-policies.
const Policy = "fair-share"

// The reasons a call is turned away, as the metrics name them.
const (
	// ReasonFull: the queue held MaxQueue callers.
	ReasonFull = "full"
	// ReasonOverload: more were waiting than the slots can serve within
	// MaxWait, judging by how long calls hold them.
	ReasonOverload = "overload"
	// ReasonTimeout: the call waited MaxWait.
	ReasonTimeout = "timeout"
)

// Queue admits database calls in weighted fair order. Its methods are
// safe for concurrent use.
type Queue struct {
	s   Settings
	now func() time.Time
	m   *metrics

	mu      sync.Mutex
	inUse   int // slots held
	c       controller
	waiting int // callers waiting, over every identity
	ids     map[string]*identity
	// queued are the identities with callers waiting.
	queued map[*identity]struct{}
	// avgHold is an average of how long calls hold a slot, in seconds;
	// 0 until one has.
	avgHold float64
	swept   time.Time
	arrived uint64 // waiters so far, to order them by arrival
}

// identity is what the Queue knows of one caller identity.
type identity struct {
	id     string
	weight float64
	// usage is the database time used, in seconds, faded to at.
	usage float64
	at    time.Time
	// held is how many slots the identity holds, and pending what was
	// charged for them on entry, before their real use is known.
	held    int
	pending float64
	// est is an average of the identity's own calls' use, the charge of
	// its next slot.
	est     float64
	waiters []*waiter // oldest first
	// works are the kinds of call it made, by name (see WithWork).
	works map[string]*work
	// party, when set, is whom this identity is for: a call shared by
	// several callers (see Party).
	party *Party
}

// waiter is one call waiting for a slot.
type waiter struct {
	id    *identity
	work  *work
	since time.Time
	seq   uint64
	// unloaded is whether the slot it got was among the first MinSlots.
	unloaded bool
	// ready receives nil when the slot is given, or the refusal.
	ready chan error
}

// New returns a Queue with the slots of s.
func New(s Settings) *Queue {
	s = s.withDefaults()
	return &Queue{
		s:      s,
		now:    time.Now,
		m:      newMetrics(),
		c:      controller{limit: float64(s.Slots), slowdown: 1, active: make(map[*work]struct{})},
		ids:    make(map[string]*identity),
		queued: make(map[*identity]struct{}),
	}
}

// Enter waits for a slot for the caller of ctx (see WithCaller) and
// returns the function that gives it back, told how long the call held a
// database connection: that is what the caller is charged. A call turned
// away gets an apperr of kind Reduced; a call whose ctx ends while it
// waits gets ctx's error.
func (q *Queue) Enter(ctx context.Context) (leave func(held time.Duration), err error) {
	q.mu.Lock()
	now := q.now()
	var id *identity
	if p := partyOf(ctx); p != nil {
		id = q.partyIdentity(p)
	} else {
		id = q.identity(callerOf(ctx), now)
	}
	wk := q.work(id, workOf(ctx))
	if q.inUse < q.slots() && q.waiting == 0 || q.light(id, now) {
		leave := wk.leaveFor(q.grant(id))
		q.mu.Unlock()
		q.m.admitted(false)
		return leave, nil
	}
	w := &waiter{id: id, work: wk, since: now, ready: make(chan error, 1)}
	q.wait(w)
	q.shedExcess(now)
	q.mu.Unlock()
	return q.await(ctx, w)
}

// await waits for w's turn, its refusal, MaxWait or the end of ctx.
func (q *Queue) await(ctx context.Context, w *waiter) (func(time.Duration), error) {
	timer := time.NewTimer(q.s.MaxWait)
	defer timer.Stop()
	var err error
	select {
	case err = <-w.ready:
	case <-timer.C:
		err = q.giveUp(w, q.refusal(ReasonTimeout))
	case <-ctx.Done():
		err = q.giveUp(w, ctx.Err())
	}
	q.m.waited(time.Since(w.since))
	if err != nil {
		return nil, err
	}
	q.m.admitted(true)
	return w.work.leaveFor(w.unloaded), nil
}

// giveUp takes w out of the queue, unless its slot or refusal came
// meanwhile, and returns why it did not get a slot. A slot that came
// after its caller stopped waiting for it is given back.
func (q *Queue) giveUp(w *waiter, why error) error {
	q.mu.Lock()
	removed := q.remove(w)
	q.mu.Unlock()
	if removed {
		if r, ok := why.(*apperr.Error); ok && r.Kind == apperr.Reduced {
			q.m.shed(ReasonTimeout)
		}
		return why
	}
	if err := <-w.ready; err != nil {
		return err
	}
	if _, reduced := why.(*apperr.Error); reduced {
		return nil // the slot came in time after all
	}
	w.work.leaveFor(w.unloaded)(0)
	return why
}

// identity returns the record of c, made on first use, with c's weight
// (a tier may change).
func (q *Queue) identity(c caller, now time.Time) *identity {
	id, ok := q.ids[c.id]
	if !ok {
		id = &identity{id: c.id, at: now}
		q.ids[c.id] = id
	}
	id.weight = float64(c.weight)
	return id
}

// grant gives a slot to id, charging it what its calls usually use until
// it says what this one did. It reports whether the call runs unloaded:
// with no more than MinSlots calls running, itself included.
func (q *Queue) grant(id *identity) (unloaded bool) {
	q.inUse++
	id.held++
	est := id.est
	if est == 0 {
		est = q.avgHold
	}
	id.pending += est
	return q.inUse <= q.s.MinSlots
}

// leave gives back a slot of a call of w that held a connection for
// held, unloaded or not (see grant), and passes the slot on.
func (q *Queue) leave(w *work, held time.Duration, unloaded bool) {
	h := held.Seconds()
	id := w.id
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	id.pending -= id.pending / float64(id.held)
	id.held--
	if id.held == 0 {
		id.pending = 0 // no rounding left over
	}
	if id.party != nil {
		q.chargeParty(id.party, h, now)
	} else {
		id.fade(now, q.s.HalfLife)
		id.usage += h
		id.est = average(id.est, h)
	}
	q.avgHold = average(q.avgHold, h)
	q.inUse--
	q.observe(w, held, unloaded)
	q.adjust(now)
	q.dispatch()
	q.sweep(now)
}

// average moves a running average a fifth of the way to x.
func average(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return avg + (x-avg)/5
}

// dispatch gives the free slots to the waiting callers, the lightest
// identity's oldest first, and those beyond the limit to a light one.
func (q *Queue) dispatch() {
	now := q.now()
	for q.waiting > 0 {
		id := q.lightest()
		if q.inUse >= q.slots() && !q.light(id, now) {
			return
		}
		w := id.waiters[0]
		q.remove(w)
		w.unloaded = q.grant(id)
		w.ready <- nil
	}
}

func (q *Queue) wait(w *waiter) {
	q.arrived++
	w.seq = q.arrived
	w.id.waiters = append(w.id.waiters, w)
	q.queued[w.id] = struct{}{}
	q.waiting++
}

// remove takes w out of the queue; false when it was not in it.
func (q *Queue) remove(w *waiter) bool {
	ws := w.id.waiters
	for i, x := range ws {
		if x == w {
			copy(ws[i:], ws[i+1:])
			ws[len(ws)-1] = nil
			w.id.waiters = ws[:len(ws)-1]
			if len(w.id.waiters) == 0 {
				delete(q.queued, w.id)
			}
			q.waiting--
			return true
		}
	}
	return false
}

// fade brings id's usage to now.
func (id *identity) fade(now time.Time, halfLife time.Duration) {
	if dt := now.Sub(id.at); dt > 0 {
		id.usage *= math.Exp2(-dt.Seconds() / halfLife.Seconds())
		id.at = now
	}
}

// load is id's normalized use: the database time it used (faded) and was
// charged for the slots it holds, over its weight. Slots go to the
// waiting identity of least load; refusals to that of most.
func (q *Queue) load(id *identity, now time.Time) float64 {
	if id.party != nil {
		return q.partyLoad(id.party, now) + id.pending/id.weight
	}
	id.fade(now, q.s.HalfLife)
	return (id.usage + id.pending) / id.weight
}

// before orders identities lightest first: by load, then by slots held
// for the weight (two that have used nothing), then by who waited first.
func (q *Queue) before(a, b *identity, now time.Time) bool {
	la, lb := q.load(a, now), q.load(b, now)
	if la != lb {
		return la < lb
	}
	ha, hb := float64(a.held)/a.weight, float64(b.held)/b.weight
	if ha != hb {
		return ha < hb
	}
	return a.waiters[0].seq < b.waiters[0].seq
}

func (q *Queue) lightest() *identity {
	now := q.now()
	var best *identity
	for id := range q.queued {
		if best == nil || q.before(id, best, now) {
			best = id
		}
	}
	return best
}

func (q *Queue) heaviest(now time.Time) *identity {
	var worst *identity
	for id := range q.queued {
		if worst == nil || q.before(worst, id, now) {
			worst = id
		}
	}
	return worst
}

// shedExcess turns away the newest waiting calls of the heaviest
// identities while more wait than the queue holds, or than the slots can
// serve within MaxWait.
func (q *Queue) shedExcess(now time.Time) {
	for q.waiting > 0 {
		reason := ""
		switch {
		case q.waiting > q.s.MaxQueue:
			reason = ReasonFull
		case q.waiting > q.servable():
			reason = ReasonOverload
		default:
			return
		}
		id := q.heaviest(now)
		w := id.waiters[len(id.waiters)-1]
		q.remove(w)
		q.m.shed(reason)
		w.ready <- q.refusalLocked(reason)
	}
}

// servable is how many waiting calls the slots can serve within MaxWait,
// given how long calls hold them; MaxQueue until that is known.
func (q *Queue) servable() int {
	if q.avgHold <= 0 {
		return q.s.MaxQueue
	}
	// By every slot, not the narrowed limit: a narrowed limit makes
	// calls wait longer, each within MaxWait, rather than turning them
	// away at once, which would make them come back at once and load the
	// service (and the database's machine) with refusals.
	n := float64(q.s.Slots) * q.s.MaxWait.Seconds() / q.avgHold
	if n > float64(q.s.MaxQueue) {
		return q.s.MaxQueue
	}
	return max(int(n), 1)
}

func (q *Queue) refusal(reason string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.refusalLocked(reason)
}

// refusalLocked is the error of a call turned away: Retry-After is about
// how long the calls waiting now take to be served.
func (q *Queue) refusalLocked(reason string) error {
	drain := time.Duration(float64(q.waiting) * q.avgHold / float64(q.slots()) * float64(time.Second))
	retry := min(max(drain, time.Second), 30*time.Second)
	msg := "The database is busy and this caller has been using more of it than others; try again shortly."
	if reason == ReasonTimeout {
		msg = "The database is busy; try again shortly."
	}
	return apperr.ReducedCapacity(msg, retry, Policy)
}

// sweep forgets, once per half-life, the identities that hold and await
// nothing and whose use has faded to almost nothing: a newcomer is
// treated the same.
func (q *Queue) sweep(now time.Time) {
	if now.Sub(q.swept) < q.s.HalfLife {
		return
	}
	q.swept = now
	for key, id := range q.ids {
		if id.held == 0 && len(id.waiters) == 0 {
			if id.fade(now, q.s.HalfLife); id.usage < 1e-4 {
				delete(q.ids, key)
			}
		}
	}
}

// Waiting returns how many calls wait for a slot.
func (q *Queue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// Busy says whether the database has no room for work nobody has
// asked for yet (an items page read ahead): a caller waits, or the calls
// running fill the limit.
func (q *Queue) Busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting > 0 || q.inUse >= q.slots()
}

// InUse returns how many slots are held.
func (q *Queue) InUse() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inUse
}
