package tiles

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/geogate/geogate/internal/fairshare"
	"github.com/geogate/geogate/internal/pg"
)

// flights lets one caller at a time do the work for a key while the others
// asking for it meanwhile wait for that result, or leave when their own
// context ends. The work belongs to none of them: it runs under a context
// of its own, which ends only when every caller waiting for it has left,
// and its database time is split evenly among those that get its result.
// It runs on the first caller's goroutine, though: a fresh goroutine per
// render had to grow its stack for the database driver's deep calls every
// time, which cost about a sixth of a cold render's CPU in the driver.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	done chan struct{}
	res  result
	err  error
	// waiters are the callers that joined the first, and interested
	// those still waiting, the first included, under flights.mu.
	waiters, interested int
	// stop ends the work once nobody waits for it.
	stop context.CancelFunc
	// db is the database time the work took, and share what each of its
	// receivers is charged, set before done closes.
	db, share time.Duration
	// party are the callers the work is for: the fair queue admits it
	// as the lightest of them.
	party *fairshare.Party
}

var errFlightPanicked = errors.New("tiles: the render panicked")

// do returns fn's result for key, running fn unless a call for key is in
// flight, in which case it waits for that call's result or for ctx; led
// says this caller ran it. fn is given the work's own context, which
// keeps ctx's values (the caller that leads is the one the work is
// limited as) but ends only when every caller has left; the fair queue
// admits it as the lightest of the callers waiting for it.
// Each caller that gets the result has its share of the work's database
// time added to its own meter (pg.MeterOf).
func (f *flights) do(ctx context.Context, key string, fn func(context.Context) (result, error)) (res result, err error, led bool) {
	f.mu.Lock()
	if fl, ok := f.m[key]; ok {
		fl.waiters++
		fl.interested++
		fl.party.Join(ctx) // before it counts as waiting
		f.mu.Unlock()
		select {
		case <-fl.done:
			pg.MeterOf(ctx).Add(fl.share)
			return fl.res, fl.err, false
		case <-ctx.Done():
			f.leave(fl)
			return result{}, ctx.Err(), false
		}
	}
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	work, meter := pg.WithMeter(work)
	party := fairshare.NewParty(ctx)
	work = fairshare.WithParty(work, party)
	fl := &flight{done: make(chan struct{}), err: errFlightPanicked, interested: 1, stop: stop, party: party}
	if f.m == nil {
		f.m = make(map[string]*flight)
	}
	f.m[key] = fl
	f.mu.Unlock()
	left := context.AfterFunc(ctx, func() { f.leave(fl) })
	finished := false
	finish := func() {
		if finished {
			return
		}
		finished = true
		f.mu.Lock()
		delete(f.m, key)
		fl.db = meter.DB()
		fl.share = fl.db / time.Duration(max(fl.interested, 1))
		f.mu.Unlock()
		left()
		stop()
		close(fl.done)
	}
	defer finish() // a panicking fn still releases its waiters
	fl.res, fl.err = fn(work)
	finish()
	if ctx.Err() != nil {
		return result{}, ctx.Err(), true
	}
	pg.MeterOf(ctx).Add(fl.share)
	return fl.res, fl.err, true
}

// leave drops a caller's interest in fl, and ends its work when nobody is
// left to want it.
func (f *flights) leave(fl *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl.interested--
	if fl.interested == 0 {
		fl.stop()
	}
}
