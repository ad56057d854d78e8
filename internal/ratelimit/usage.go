package ratelimit

import (
	"context"
	"fmt"
)

// Usage is what one identity has spent of one policy, and what is left,
// read without spending anything.
type Usage struct {
	Policy string
	// Windows are the windows that apply to the identity in its tier, as
	// a decision would find them (Exceeded is never set). Empty when Redis
	// was unavailable and the policy fails open: nothing is counted then.
	Windows []WindowState
	// Concurrency is the policy's cap on the identity's requests in
	// flight (0: none) and InFlight how many are in flight now.
	Concurrency int
	InFlight    int
	Shadow      bool
	// Backend is where the counts were read: BackendRedis, BackendLocal,
	// or BackendNone when nothing is counted.
	Backend string
}

// Usage reads r's windows (r.Cost is ignored) and, when the policy caps
// concurrency, the identity's requests in flight. It runs the deciding
// script itself on the same keys, with a cost of 0, which trims and counts
// as a decision does and writes nothing else: a window that Usage finds
// with Remaining r admits exactly r more units, if nothing else is
// admitted meanwhile and no unit leaves it. Failure modes apply as for
// Check.
func (l *Limiter) Usage(ctx context.Context, r Request) (Usage, error) {
	p, ok := l.policy(r.Policy)
	if !ok {
		return Usage{}, fmt.Errorf("%w %q", ErrUnknownPolicy, r.Policy)
	}
	d, err := l.read(ctx, p, r)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Policy: p.Name, Windows: d.Windows, Concurrency: p.Concurrency, Shadow: p.Shadow, Backend: d.Backend}
	if p.Concurrency > 0 {
		if u.InFlight, err = l.inFlight(ctx, p, r.Identity); err != nil {
			return Usage{}, err
		}
	}
	return u, nil
}

// read is the decision a request of cost 0 gets: the windows, untouched.
func (l *Limiter) read(ctx context.Context, p *compiled, r Request) (Decision, error) {
	ws := p.windowsFor(r.Tier, r.Identity)
	o, backend, err := l.decide(ctx, p, p.key(r.Identity), l.at(r.At), 0, ws, "", nil)
	if err != nil {
		return Decision{}, err
	}
	return newDecision(p, ws, 0, o, backend), nil
}

// inFlight counts identity's requests in flight under p, where acquire
// would: in Redis, else as the failure mode says (none when failing open).
func (l *Limiter) inFlight(ctx context.Context, p *compiled, identity string) (int, error) {
	key := flightKey(p.Name, identity)
	var n int
	backend, err := l.route(ctx, p, func(ctx context.Context) (err error) {
		n, err = l.redis.inFlight(ctx, key, 0)
		return err
	}, func() {
		n, _ = l.local.inFlight(ctx, key, 0)
	})
	if err != nil || backend == BackendNone {
		return 0, err
	}
	return n, nil
}
