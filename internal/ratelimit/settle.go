package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed settle.lua
var settleLua string

var settleScript = redis.NewScript(settleLua)

// reservation is what an admitted decision charged, so that Settle can
// replace it with the request's true cost.
type reservation struct {
	policy  string
	alg     Algorithm
	key     string
	member  string
	cost    int
	at      int64 // the decision's time, microseconds on its clock
	backend string
	set     *windowSet
	quotas  []quota
	// tally is the day's tally the decision was counted in; "" for none.
	tally string
}

// Settle charges an admitted request its true cost in place of the cost
// it reserved (Decision.Cost): the difference is refunded, or added at
// once without a check, since the work is done. The bound this keeps is
// documented in docs/design/rate-limiter.md: the units admitted in any
// window exceed its limit by at most what the requests then in flight had
// under-reserved. A decision that was refused, failed open or decided in
// shadow mode has nothing to settle; neither has actual equal to the
// reservation. A settle that Redis cannot take is dropped, and the
// reservation stands.
func (l *Limiter) Settle(ctx context.Context, d Decision, actual int) error {
	return l.settle(ctx, d, actual, false)
}

// Refund takes back all an admitted decision charged, for a request
// refused by another policy it also needed: its units, and its admission
// in the day's tally, as if it had never been decided.
func (l *Limiter) Refund(ctx context.Context, d Decision) error {
	return l.settle(ctx, d, 0, true)
}

func (l *Limiter) settle(ctx context.Context, d Decision, actual int, refund bool) error {
	r := d.res
	if r == nil || d.Limited || actual < 0 || actual == r.cost {
		return nil
	}
	delta := actual - r.cost
	at := l.at(time.Time{})
	switch r.backend {
	case BackendLocal:
		l.local.settle(r, delta, at)
		return nil
	case BackendRedis:
		p, ok := l.policy(r.policy)
		if !ok {
			return fmt.Errorf("%w %q", ErrUnknownPolicy, r.policy)
		}
		_, _, err := l.onRedis(ctx, p, func(ctx context.Context) error {
			return l.redis.settle(ctx, r, delta, at, refund)
		})
		return err
	}
	return nil
}

// settle runs settle.lua for r at time at (microseconds; 0: the Redis
// clock).
func (s *redisStore) settle(ctx context.Context, r *reservation, delta int, at int64, refund bool) error {
	keys := make([]string, 1, 1+len(r.quotas))
	keys[0] = r.key
	for _, q := range r.quotas {
		keys = append(keys, q.key)
	}
	tallied := "0"
	if r.tally != "" {
		keys, tallied = append(keys, r.tally), "1"
		if refund {
			tallied = "2"
		}
	}
	var longest int64
	for _, w := range r.set.slide {
		longest = max(longest, w.Period.Microseconds())
	}
	var when any = ""
	if at != 0 {
		when = at
	}
	args := []any{string(r.alg), delta, r.member, r.cost, r.at, longest, when, tallied}
	for _, w := range r.set.slide {
		args = append(args, w.Period.Microseconds())
	}
	_, err := s.run(ctx, "settle", settleScript, keys, args...)
	return err
}

// settle mirrors settle.lua in process, at time at (0: its own clock).
func (s *localStore) settle(r *reservation, delta int, at int64) {
	now := max(s.clock(at), r.at)
	sh := s.shard(r.key, now)
	defer sh.mu.Unlock()
	if len(r.set.slide) > 0 {
		if r.alg == Counter {
			sh.settleCounter(r, int64(delta), now)
		} else {
			sh.settleLog(r, int64(delta), now)
		}
	}
	for _, q := range r.quotas {
		if c := sh.quotas[q.key]; c != nil && now < c.expires {
			c.n = max(0, c.n+int64(delta))
		}
	}
}

// settleLog refunds units the reservation added (its scores are all
// r.at) or adds the excess at r.at, as settle.lua does.
func (sh *localShard) settleLog(r *reservation, delta, now int64) {
	var long int64
	for _, w := range r.set.slide {
		long = max(long, w.Period.Microseconds())
	}
	l := sh.logs[r.key]
	if l == nil || now >= l.expires {
		if delta < 0 || r.at <= now-long {
			return
		}
		l = &localLog{}
		sh.logs[r.key] = l
	}
	if delta < 0 {
		n := min(-delta, int64(r.cost))
		i, found := slices.BinarySearch(l.scores, r.at)
		if !found {
			return
		}
		j := i
		for j < len(l.scores) && l.scores[j] == r.at && int64(j-i) < n {
			j++
		}
		l.scores = slices.Delete(l.scores, i, j)
		return
	}
	if r.at <= now-long {
		return
	}
	pos := sort.Search(len(l.scores), func(j int) bool { return l.scores[j] > r.at })
	l.scores = slices.Insert(l.scores, pos, slices.Repeat([]int64{r.at}, int(delta))...)
	l.expires = max(l.expires, r.at+long)
}

// settleCounter adjusts the bucket the reservation was counted in, in
// every window that still counts it, as settle.lua does.
func (sh *localShard) settleCounter(r *reservation, delta, nowus int64) {
	now, at := floorDiv(nowus, 1000), floorDiv(r.at, 1000)
	c := sh.counters[r.key]
	if c == nil || now >= c.expires {
		return
	}
	for _, w := range r.set.slide {
		p := w.Period.Milliseconds()
		f, ok := c.fields[p]
		if !ok {
			continue
		}
		switch rb := floorDiv(at, p); {
		case f[0] == rb:
			f[1] = max(0, f[1]+delta)
		case f[0] == rb+1:
			f[2] = max(0, f[2]+delta)
		}
		c.fields[p] = f
	}
}
