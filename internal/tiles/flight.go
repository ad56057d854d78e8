package tiles

import (
	"context"
	"errors"
	"sync"
)

// flights lets one caller at a time do the work for a key while the others
// asking for it meanwhile wait for that result, or leave when their own
// context ends. Unlike singleflight's DoChan, the work runs on the first
// caller's own goroutine: a fresh goroutine per render had to grow its
// stack for the database driver's deep calls every time, which cost about
// a sixth of a cold render's CPU in the driver.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	done    chan struct{}
	res     result
	err     error
	waiters int // callers waiting for it, under flights.mu
}

var errFlightPanicked = errors.New("tiles: the render panicked")

// do returns fn's result for key, running fn unless a call for key is in
// flight, in which case it waits for that call's result or for ctx.
func (f *flights) do(ctx context.Context, key string, fn func() (result, error)) (result, error) {
	f.mu.Lock()
	if fl, ok := f.m[key]; ok {
		fl.waiters++
		f.mu.Unlock()
		select {
		case <-fl.done:
			return fl.res, fl.err
		case <-ctx.Done():
			return result{}, ctx.Err()
		}
	}
	fl := &flight{done: make(chan struct{}), err: errFlightPanicked}
	if f.m == nil {
		f.m = make(map[string]*flight)
	}
	f.m[key] = fl
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.m, key)
		f.mu.Unlock()
		close(fl.done)
	}()
	fl.res, fl.err = fn()
	return fl.res, fl.err
}
