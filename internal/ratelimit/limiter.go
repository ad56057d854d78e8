// Package ratelimit enforces named, per-identity rate limits that hold
// exactly across any number of replicas: a sliding-window log per (policy,
// identity) in a Redis sorted set, trimmed, counted and added to by one Lua
// script in one round trip, timed by the Redis clock. It also offers a
// sliding-window counter approximation for high limits, a per-identity
// concurrency limit, shadow mode, and an in-process twin with the same
// semantics for when Redis is unreachable.
package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/apperr"
)

// Options tune a Limiter; the zero value is usable.
type Options struct {
	// Timeout bounds every Redis call (default 250ms).
	Timeout time.Duration
	// Registerer receives the limiter's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// BreakerThreshold consecutive Redis failures open the circuit breaker
	// (default 3). While it is open, the limiter pings Redis every
	// BreakerCooldown (default 500ms), with or without traffic, and the
	// first answer closes it, after the units admitted in process meanwhile
	// have been handed over to Redis.
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// Pipeline, when above 1, sends the script calls of concurrent
	// decisions together, up to this many per round trip, from
	// PipelineWorkers (default 4) senders. It trades a little latency at
	// low load for throughput at high load. Close stops the senders.
	Pipeline        int
	PipelineWorkers int
	// Now, when set, is the clock of every decision and read that does
	// not name its own Request.At, in place of the Redis clock: for tests
	// that move time (across midnight, say) through the HTTP middleware.
	// In-flight leases keep the Redis clock.
	Now func() time.Time
	// TallyDays, when above 0, tallies every decision made through Redis
	// per identity, policy and UTC day (admitted and refused requests) in
	// the deciding script's own run, kept TallyDays days after the day
	// ends; Tallies reads them. TallyOf, when set, picks the identities
	// tallied (nil: all).
	TallyDays int
	TallyOf   func(identity string) bool
}

// Limiter decides whether requests fit their policy's limits. It is safe
// for concurrent use.
type Limiter struct {
	// table holds the compiled policies by name; SetPolicies swaps it
	// whole, so that a decision sees one version of them.
	table   atomic.Pointer[map[string]*compiled]
	redis   *redisStore // nil: in-process only
	local   *localStore
	br      *breaker
	timeout time.Duration
	m       *metrics
	log     *slog.Logger
	proc    string
	seq     atomic.Uint64
	now     func() time.Time // nil: the stores' own clocks

	tallyDays int
	tallyOf   func(string) bool
	today     atomic.Pointer[tallyDay]
	setMu     sync.Mutex // one SetPolicies at a time

	closeOnce sync.Once
	logMu     sync.Mutex
	lastLog   map[string]time.Time
}

// ErrUnknownPolicy is returned for a policy name that is not configured.
var ErrUnknownPolicy = errors.New("ratelimit: unknown policy")

// New returns a Limiter for policies backed by rdb.
// A nil rdb makes every decision in process, for a single-instance
// deployment.
func New(rdb redis.UniversalClient, policies map[string]Policy, o Options) (*Limiter, error) {
	if o.Timeout <= 0 {
		o.Timeout = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BreakerThreshold <= 0 {
		o.BreakerThreshold = 3
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = 500 * time.Millisecond
	}
	l := &Limiter{
		local:     newLocalStore(),
		br:        newBreaker(o.BreakerThreshold, o.BreakerCooldown, o.Timeout),
		timeout:   o.Timeout,
		m:         newMetrics(o.Registerer),
		log:       o.Logger,
		proc:      processID(),
		lastLog:   map[string]time.Time{},
		now:       o.Now,
		tallyDays: o.TallyDays,
		tallyOf:   o.TallyOf,
	}
	t, err := l.compileAll(policies)
	if err != nil {
		return nil, err
	}
	l.table.Store(&t)
	if rdb != nil {
		l.redis = newRedisStore(rdb)
		l.redis.onReload = l.m.reloads.Inc
		if o.Pipeline > 1 {
			if o.PipelineWorkers <= 0 {
				o.PipelineWorkers = 4
			}
			l.redis.batch = newBatcher(rdb, o.Pipeline, o.PipelineWorkers, o.Timeout, l.m.reloads.Inc)
		}
		obs := map[string][2]prometheus.Observer{}
		for _, op := range []string{"log", "counter", "read", "acquire", "release", "inflight", "settle"} {
			obs[op] = [2]prometheus.Observer{l.m.redisDur.WithLabelValues(op, "ok"), l.m.redisDur.WithLabelValues(op, "error")}
		}
		l.redis.observe = func(op string, d time.Duration, err error) {
			i := 0
			if err != nil {
				i = 1
			}
			obs[op][i].Observe(d.Seconds())
		}
		l.br.ping = func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
		l.br.handOver = l.handOver
	}
	l.br.onChange = func(open bool) {
		if open {
			l.m.breaker.Set(1)
			l.m.trips.Inc()
			l.log.Warn("ratelimit: redis failing, policies switch to their failure mode")
			return
		}
		l.m.breaker.Set(0)
		l.log.Info("ratelimit: redis is back, limiting through redis again")
	}
	return l, nil
}

// Close stops probing Redis and the pipeline senders, if any; decisions
// after Close fall back as when Redis is unavailable.
func (l *Limiter) Close() {
	l.closeOnce.Do(func() {
		l.br.close()
		if l.redis != nil && l.redis.batch != nil {
			l.redis.batch.close()
		}
	})
}

// processID is random per process, so that log members written by
// different replicas never collide.
func processID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// member returns a sorted-set member prefix unique to this call.
func (l *Limiter) member() string {
	return l.proc + strconv.FormatUint(l.seq.Add(1), 36)
}

// compileAll validates and compiles policies, keyed by their names.
func (l *Limiter) compileAll(policies map[string]Policy) (map[string]*compiled, error) {
	t := make(map[string]*compiled, len(policies))
	for name, p := range policies {
		p.Name = name
		p = p.counted()
		if err := p.Validate(); err != nil {
			return nil, err
		}
		c := compile(p)
		for o, outcome := range []string{"allowed", "rejected"} {
			for b, backend := range backends {
				c.dec[o][b] = l.m.decisions.WithLabelValues(name, outcome, backend)
			}
		}
		t[name] = c
	}
	return t, nil
}

// policies returns the policy table decisions use now.
func (l *Limiter) policies() map[string]*compiled { return *l.table.Load() }

// policy returns the named compiled policy.
func (l *Limiter) policy(name string) (*compiled, bool) {
	p, ok := l.policies()[name]
	return p, ok
}

// SetPolicies replaces every policy at once: decisions that start after
// it returns use the new windows, tiers and identities. Counts in Redis
// live on, keyed by policy and identity, so an unchanged window keeps
// what it has counted and a changed one judges the same log by its new
// limit. It refuses, changing nothing, a set that fails validation or
// leaves out a policy now in force, since routes spend policies by name.
func (l *Limiter) SetPolicies(policies map[string]Policy) error {
	l.setMu.Lock()
	defer l.setMu.Unlock()
	for name := range l.policies() {
		if _, ok := policies[name]; !ok {
			return fmt.Errorf("policy %s is missing: policies can be changed and added while running, not removed", name)
		}
	}
	t, err := l.compileAll(policies)
	if err != nil {
		return err
	}
	l.table.Store(&t)
	return nil
}

// Policy returns the named policy.
func (l *Limiter) Policy(name string) (Policy, bool) {
	p, ok := l.policy(name)
	if !ok {
		return Policy{}, false
	}
	return p.Policy, true
}

// Request is one rate-limit check.
type Request struct {
	Policy   string
	Identity string
	// Tier selects a per-tier override of the policy's windows, if any.
	Tier string
	// Cost is how many units the request consumes; below 1 counts as 1.
	Cost int
	// At is the caller clock: when set, the decision uses this time instead
	// of the Redis clock. For tests and replays; replicas with skewed
	// clocks must leave it zero.
	At time.Time
}

// Allow checks one request of cost units by identity under policy.
func (l *Limiter) Allow(ctx context.Context, policy, identity string, cost int) (Decision, error) {
	return l.Check(ctx, Request{Policy: policy, Identity: identity, Cost: cost})
}

// Check decides r. The error is ErrUnknownPolicy, or an apperr.Unavailable
// when Redis cannot decide and the policy fails closed, or the context's
// error; a rejection is not an error but a Decision with Allowed false.
func (l *Limiter) Check(ctx context.Context, r Request) (Decision, error) {
	p, ok := l.policy(r.Policy)
	if !ok {
		return Decision{}, fmt.Errorf("%w %q", ErrUnknownPolicy, r.Policy)
	}
	cost := max(1, r.Cost)
	ws := p.windowsFor(r.Tier, r.Identity)
	key := p.key(r.Identity)
	at := l.at(r.At)
	member := l.member()
	t := l.tallyFor(key, r.Identity, at)
	o, backend, err := l.decide(ctx, p, key, at, cost, ws, member, t)
	if err != nil {
		l.m.decisions.WithLabelValues(p.Name, "unavailable", backend).Inc()
		return Decision{}, err
	}
	d := newDecision(p, ws, cost, o, backend)
	if o.admitted && backend != BackendNone {
		d.res = &reservation{policy: p.Name, alg: p.Algorithm, key: key, member: member, cost: cost, at: o.now, backend: backend, set: ws, quotas: quotas(key, ws, o.now)}
		if t != nil && backend == BackendRedis {
			d.res.tally = t.key
		}
	}
	outcome := 0
	if d.Limited {
		outcome = 1
		if p.Shadow {
			d.Allowed = true
			l.m.shadow.WithLabelValues(p.Name).Inc()
		}
	}
	p.dec[outcome][backendIndex(backend)].Inc()
	return d, nil
}

// at is the clock of a decision in microseconds since the epoch: the
// request's own, else Options.Now, else 0 for the store's clock.
func (l *Limiter) at(t time.Time) int64 {
	if t.IsZero() && l.now != nil {
		t = l.now()
	}
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// Backends a decision can come from.
const (
	BackendRedis = "redis"
	BackendLocal = "local"
	BackendNone  = "none" // failed open: nothing was counted
)

var backends = []string{BackendRedis, BackendLocal, BackendNone}

func backendIndex(b string) int {
	switch b {
	case BackendRedis:
		return 0
	case BackendLocal:
		return 1
	}
	return 2
}

// decide asks Redis unless the breaker keeps it away, then falls back as
// the policy says.
func (l *Limiter) decide(ctx context.Context, p *compiled, key string, at int64, cost int, ws *windowSet, member string, t *tally) (outcome, string, error) {
	var o outcome
	var err error
	backend, rerr := l.route(ctx, p, func(ctx context.Context) (err error) {
		o, err = l.redis.decide(ctx, p.Algorithm, key, at, cost, ws, member, t)
		return err
	}, func() {
		o, err = l.local.decide(ctx, p.Algorithm, key, at, cost, ws, "", nil)
	})
	switch {
	case rerr != nil:
		return outcome{}, BackendNone, rerr
	case backend == BackendNone:
		return outcome{admitted: true}, BackendNone, nil // failed open: nothing counted
	}
	return o, backend, err
}

// route runs onRedis against Redis and, when Redis did not decide, falls
// back as p says: inProcess decides in process (BackendLocal), or nothing
// is decided (BackendNone, failing open), or an error says Redis is
// unavailable. A request the breaker kept away decides in process only if
// the breaker is still open then; had it closed meanwhile, Redis, which
// has been handed the in-process counts, decides, so that no window is
// decided in both places once Redis is back.
func (l *Limiter) route(ctx context.Context, p *compiled, onRedis func(context.Context) error, inProcess func()) (string, error) {
	for {
		decided, kept, err := l.onRedis(ctx, p, onRedis)
		switch {
		case err != nil:
			return BackendNone, err
		case decided:
			return BackendRedis, nil
		}
		local, err := l.fallback(p)
		switch {
		case err != nil:
			return BackendNone, err
		case !local:
			return BackendNone, nil
		}
		if l.br.inProcess(kept, inProcess) {
			return BackendLocal, nil
		}
	}
}

// onRedis runs call against Redis, within the Redis timeout, unless there
// is no Redis or the breaker keeps calls away from it (kept). It reports
// whether Redis answered; Redis errors feed the breaker and are logged,
// not returned. The only error is ctx's own, when the caller gave up
// first: that says nothing about Redis.
func (l *Limiter) onRedis(ctx context.Context, p *compiled, call func(context.Context) error) (decided, kept bool, err error) {
	if l.redis == nil {
		return false, false, nil
	}
	if !l.br.allow() {
		return false, true, nil
	}
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	err = call(cctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return false, false, ctx.Err()
	}
	l.br.done(err)
	if err != nil {
		l.warn(p.Name, "ratelimit: redis call failed", "policy", p.Name, "err", err.Error())
		return false, false, nil
	}
	return true, false, nil
}

// fallback says how p decides when Redis did not: in process (local), by
// admitting without a limit (neither local nor an error), or not at all
// (an Unavailable error, for a fail-closed policy).
func (l *Limiter) fallback(p *compiled) (local bool, err error) {
	if l.redis == nil {
		return true, nil
	}
	l.m.fallbacks.WithLabelValues(p.Name, string(p.Failure)).Inc()
	switch p.Failure {
	case FailLocal:
		return true, nil
	case FailOpen:
		l.warn(p.Name+"/open", "ratelimit: admitting without a limit while redis is unavailable", "policy", p.Name)
		return false, nil
	}
	return false, errUnavailable
}

var errUnavailable = apperr.New(apperr.Unavailable, "Rate limiting is temporarily unavailable; please retry shortly.")

// warn logs at most once a second per topic, so that an outage does not
// turn into a log flood.
func (l *Limiter) warn(topic, msg string, args ...any) {
	l.logMu.Lock()
	now := time.Now()
	if now.Sub(l.lastLog[topic]) < time.Second {
		l.logMu.Unlock()
		return
	}
	l.lastLog[topic] = now
	l.logMu.Unlock()
	l.log.Warn(msg, args...)
}

// acquire takes one of the identity's in-flight slots under policy. When
// ok, release must be called once the request ends; a slot not released
// within the policy's lease frees itself. Policies without a concurrency
// cap always succeed. Failure modes apply as for Check.
func (l *Limiter) acquire(ctx context.Context, policy, identity string) (release func(), ok bool, err error) {
	p, found := l.policy(policy)
	if !found {
		return nil, false, fmt.Errorf("%w %q", ErrUnknownPolicy, policy)
	}
	noop := func() {}
	if p.Concurrency == 0 {
		return noop, true, nil
	}
	key := flightKey(p.Name, identity)
	token := l.member()
	backend, err := l.route(ctx, p, func(ctx context.Context) (err error) {
		ok, _, err = l.redis.acquire(ctx, key, 0, p.Concurrency, p.Lease, token)
		return err
	}, func() {
		ok, _, _ = l.local.acquire(ctx, key, 0, p.Concurrency, p.Lease, token)
	})
	if err != nil {
		return nil, false, err
	}
	var st store = l.local
	switch backend {
	case BackendNone:
		return noop, true, nil
	case BackendRedis:
		st = l.redis
	}
	if !ok {
		l.m.inflight.WithLabelValues(p.Name, "rejected").Inc()
		if p.Shadow {
			l.m.shadow.WithLabelValues(p.Name).Inc()
			return noop, true, nil
		}
		return nil, false, nil
	}
	l.m.inflight.WithLabelValues(p.Name, "acquired").Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			// Release even when the request was cancelled; the lease is the
			// safety net if this fails.
			ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
			defer cancel()
			_ = st.release(ctx, key, token)
		})
	}, true, nil
}
