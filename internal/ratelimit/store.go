package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed log.lua
	logLua string
	//go:embed counter.lua
	counterLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed inflight.lua
	inflightLua string
)

// outcome is what a store decided for one request.
type outcome struct {
	admitted bool
	now      int64 // microseconds since the Unix epoch, on the deciding clock
	windows  []windowOutcome
}

// windowOutcome is one window after the decision. All times are
// microseconds from now.
type windowOutcome struct {
	used  int64 // units counted in the window
	reset int64 // when the count next drops (0: nothing counted)
	retry int64 // when the cost would fit (0: fits now, or never can)
	// start and end bound a calendar quota's current period, in
	// microseconds since the epoch (0 for a sliding window).
	start, end int64
}

// store decides requests. at is the caller's clock in microseconds, or 0
// for the store's own clock. A cost of 0 reads: the windows as a decision
// would see them, nothing charged. The windows of the outcome are in the
// order of ws.ws.
type store interface {
	// t, when not nil, is where the decision is tallied; a store that
	// keeps no tallies ignores it.
	decide(ctx context.Context, alg Algorithm, key string, at int64, cost int, ws *windowSet, member string, t *tally) (outcome, error)
	acquire(ctx context.Context, key string, at int64, max int, lease time.Duration, token string) (bool, int, error)
	release(ctx context.Context, key, token string) error
	// inFlight counts the tokens acquire would count against the cap.
	inFlight(ctx context.Context, key string, at int64) (int, error)
}

// redisStore runs each decision as one script on Redis.
type redisStore struct {
	c        redis.UniversalClient
	log      *redis.Script
	counter  *redis.Script
	acq, rel *redis.Script
	flights  *redis.Script
	// onReload is called when Redis had lost a script (NOSCRIPT).
	onReload func()
	// observe records the duration and result of one Redis call.
	observe func(op string, d time.Duration, err error)
	// batch, when set, pipelines concurrent calls.
	batch *batcher
}

func newRedisStore(c redis.UniversalClient) *redisStore {
	return &redisStore{
		c:        c,
		log:      redis.NewScript(logLua),
		counter:  redis.NewScript(counterLua),
		acq:      redis.NewScript(acquireLua),
		rel:      redis.NewScript(releaseLua),
		flights:  redis.NewScript(inflightLua),
		onReload: func() {},
		observe:  func(string, time.Duration, error) {},
	}
}

// run is EVALSHA, then EVAL when Redis lost the script: one round trip
// normally, two after a restart, failover or SCRIPT FLUSH.
func (s *redisStore) run(ctx context.Context, op string, sc *redis.Script, keys []string, args ...any) (any, error) {
	start := time.Now()
	var v any
	var err error
	if s.batch != nil {
		v, err = s.batch.do(ctx, sc, keys, args)
	} else {
		v, err = sc.EvalSha(ctx, s.c, keys, args...).Result()
		if err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")) {
			s.onReload()
			v, err = sc.Eval(ctx, s.c, keys, args...).Result()
		}
	}
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	s.observe(op, time.Since(start), err)
	return v, err
}

// scriptCall returns the keys and arguments of one run of log.lua or
// counter.lua, and the calendar quotas among them. The quotas' periods
// are those of at, or of this process's clock when at is 0 (the script
// then reads the Redis clock for everything else).
//
// With a tally, the day's tally key comes last of the keys and its time
// to live last of the arguments.
func scriptCall(key string, at int64, cost int, member string, ws *windowSet, t *tally) ([]string, []any, []quota) {
	args := make([]any, 3, 4+len(ws.tail)+2*len(ws.cal))
	args[0] = ""
	if at != 0 {
		args[0] = at
	}
	args[1], args[2] = cost, member
	args = append(args, ws.tail...)
	keys := make([]string, 1, 2+len(ws.cal))
	keys[0] = key
	if len(ws.cal) == 0 {
		if t != nil {
			keys, args = append(keys, t.key), append(args, t.ttl)
		}
		return keys, args, nil
	}
	now := at
	if now == 0 {
		now = time.Now().UnixMicro()
	}
	qs := quotas(key, ws, now)
	for _, q := range qs {
		keys = append(keys, q.key)
		args = append(args, q.limit, q.end)
	}
	if t != nil {
		keys, args = append(keys, t.key), append(args, t.ttl)
	}
	return keys, args, qs
}

func (s *redisStore) decide(ctx context.Context, alg Algorithm, key string, at int64, cost int, ws *windowSet, member string, t *tally) (outcome, error) {
	sc, op := s.log, "log"
	if alg == Counter {
		sc, op = s.counter, "counter"
	}
	if cost == 0 {
		op = "read"
	}
	keys, args, qs := scriptCall(key, at, cost, member, ws, t)
	v, err := s.run(ctx, op, sc, keys, args...)
	if err != nil {
		return outcome{}, err
	}
	o, err := parseOutcome(v, len(ws.ws))
	if err != nil {
		return outcome{}, err
	}
	o.windows = inWindowOrder(o.windows, ws, qs)
	return o, nil
}

// inWindowOrder puts the windows of a script's answer (sliding windows,
// then quotas) in the order of ws, with the quotas' periods.
func inWindowOrder(got []windowOutcome, ws *windowSet, qs []quota) []windowOutcome {
	if len(qs) == 0 {
		return got // no quotas: the sliding windows are all of ws, in order
	}
	out := make([]windowOutcome, len(ws.ws))
	for k, i := range ws.sliding {
		out[i] = got[k]
	}
	for j, i := range ws.cal {
		out[i] = got[len(ws.sliding)+j]
		out[i].start, out[i].end = qs[j].start, qs[j].end
	}
	return out
}

func parseOutcome(v any, n int) (outcome, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2+3*n {
		return outcome{}, fmt.Errorf("rate-limit script returned %T of unexpected shape", v)
	}
	var bad bool
	num := func(i int) int64 {
		x, ok := a[i].(int64)
		bad = bad || !ok
		return x
	}
	o := outcome{admitted: num(0) == 1, now: num(1), windows: make([]windowOutcome, n)}
	for i := range n {
		o.windows[i] = windowOutcome{used: num(2 + 3*i), reset: num(3 + 3*i), retry: num(4 + 3*i)}
	}
	if bad {
		return outcome{}, fmt.Errorf("rate-limit script returned a non-integer")
	}
	return o, nil
}

func (s *redisStore) acquire(ctx context.Context, key string, at int64, max int, lease time.Duration, token string) (bool, int, error) {
	var when any = ""
	if at != 0 {
		when = at
	}
	v, err := s.run(ctx, "acquire", s.acq, []string{key}, when, max, lease.Microseconds(), token)
	if err != nil {
		return false, 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return false, 0, fmt.Errorf("acquire script returned %T of unexpected shape", v)
	}
	got, _ := a[0].(int64)
	n, _ := a[1].(int64)
	return got == 1, int(n), nil
}

func (s *redisStore) release(ctx context.Context, key, token string) error {
	_, err := s.run(ctx, "release", s.rel, []string{key}, token)
	return err
}

func (s *redisStore) inFlight(ctx context.Context, key string, at int64) (int, error) {
	var when any = ""
	if at != 0 {
		when = at
	}
	v, err := s.run(ctx, "inflight", s.flights, []string{key}, when)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("in-flight script returned %T", v)
	}
	return int(n), nil
}

// keys names the Redis keys of one identity under one policy. A script
// touches one of these keys, plus, for a policy with calendar quotas, the
// quotas' counters, which quotaKey names in the same slot; so every
// decision is single-slot on a Cluster, and the log key keeps its plain
// documented name.
func logKey(policy, identity string) string     { return "rl:" + policy + ":" + identity }
func counterKey(policy, identity string) string { return "rlc:" + policy + ":" + identity }
func flightKey(policy, identity string) string  { return "rlf:" + policy + ":" + identity }
