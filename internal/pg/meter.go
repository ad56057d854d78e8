package pg

import (
	"context"
	"sync/atomic"
	"time"
)

// Meter adds up the database time of one request: how long its calls held
// a pool connection, from the moment it was acquired to the moment the
// call's function returned. The wait for a connection is not counted: a
// request that waited cost the database nothing meanwhile, and charging it
// would make a busy database look like an expensive caller.
type Meter struct {
	ns atomic.Int64
}

type meterKey struct{}

// WithMeter returns ctx carrying a new Meter, and that Meter. The calls of
// a Runner (and the tile renders) made under the returned context add to
// it.
func WithMeter(ctx context.Context) (context.Context, *Meter) {
	m := &Meter{}
	return context.WithValue(ctx, meterKey{}, m), m
}

// MeterOf returns the Meter ctx carries, or nil when it carries none.
func MeterOf(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// DB returns the database time added so far. It is safe to call while
// calls are still adding to it.
func (m *Meter) DB() time.Duration {
	if m == nil {
		return 0
	}
	return time.Duration(m.ns.Load())
}

// Add adds d to the meter; a nil Meter ignores it.
func (m *Meter) Add(d time.Duration) {
	if m != nil {
		m.ns.Add(int64(d))
	}
}

// Held runs fn, which uses a connection already acquired, and returns how
// long it took, adding that to the Meter of ctx (if any).
func Held(ctx context.Context, fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	d := time.Since(start)
	MeterOf(ctx).Add(d)
	return d, err
}
