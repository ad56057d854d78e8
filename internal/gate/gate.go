// Package gate is the one place a request is checked, admitted and
// charged. A handler, or a worker with no request at all, calls Admit
// with the layers the work reads or writes, once it knows them: the gate
// checks that the caller may reach each of them, picks each layer's
// rate-limit policy and cost, admits the request against the limiter,
// and hands back a Pass, or an error that says why not (its status, its
// problem type and its headers: the one error-to-status function writes
// it). When the work is done the caller settles the Pass with what the
// request really cost, and releases it.
//
// The route a request came in on names its policy through WithRoute,
// whose Route also notices a route whose handler answered without asking
// the gate. The gate knows nothing of HTTP frameworks.
package gate

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/ratelimit"
)

// Free is the policy of a route that the gate checks but never charges.
const Free = ""

// Ask is what a request asks of the gate.
type Ask struct {
	// Layers are the layers the request reads or writes on the database;
	// none for a request that reads no layer (a document about the
	// service). Name them after they were looked up: what the gate
	// learns of their cost is kept for layers that exist.
	Layers []string
	// Cached are the layers the request serves from a cache or from
	// memory (a tile found in the tile cache, a document about a
	// layer): the route's cached policy (Spend.Cached) applies to them,
	// if it has one, and their own policies, which are for work on the
	// database, do not. They are admitted together with Layers.
	Cached []string
	// Write says the request changes the layers; it needs what a read
	// needs (the route's scope asks for the write scope).
	Write bool
	// Policy, when set, is spent instead of the route's.
	Policy string
	// Cost is the estimated cost per layer in the policy's units, before
	// each layer's multiplier; 0 is 1.
	Cost int
	// Size names how big the request is (a zoom, a page size, a radius;
	// whether it filters), for the estimates of database time learned
	// from requests like it; "" is Cost.
	Size string
}

// Pass is an admitted request. Header is the RateLimit fields its answer
// carries; Spent tells it what the request really cost, when the handler
// knows better than its estimate; Settle charges the true cost (what
// Spent said, and the database time measured) now, so that Header shows
// the budget as settled, for a handler that has its whole answer before
// it writes it; Done settles, unless Settle did, and releases what the
// request holds. Call Done once it has been answered; more calls of
// either do nothing.
type Pass interface {
	Header() http.Header
	Spent(Usage)
	Settle()
	Done()
}

// Usage is what a request really cost, as its handler measured it.
type Usage struct {
	// Cost is the true cost in the units the estimate (Ask.Cost) was in;
	// 0 keeps the estimate.
	Cost int
	// Bytes is how much the answer held. A policy of database time
	// charges it at BytesPerMS: building and sending an answer holds the
	// request's connection and memory as a statement does.
	Bytes int
}

// BytesPerMS is the exchange rate of bytes written into milliseconds of
// database time: 64 KiB written cost as much as a millisecond of
// PostgreSQL time, so a page of 1 MiB adds 16 ms to what its statements
// took.
const BytesPerMS = 64 << 10

// PageCost is what a page of features really cost, in request units: one
// per 100 features returned and one more per MiB written, at least 1. Every
// route that pages features is charged by it, so that a page costs what
// it made the service read and send, not what it asked for.
func PageCost(features, bytes int) int {
	return max(1, (features+99)/100+bytes>>20)
}

// PageEstimate is what a page of up to limit features reserves before it
// runs: one unit per 100 it may return; PageCost settles it.
func PageEstimate(limit int) int { return max(1, (limit+99)/100) }

// limitedAs is who the caller of ctx is limited as: its identity's limit
// key and tier.
func limitedAs(ctx context.Context) (identity, tier string) {
	id := auth.FromContext(ctx)
	return id.LimitKey(), id.Tier
}

// Gate admits requests. Its zero value is not usable; see New.
type Gate struct {
	rules   access.Settings
	limiter *ratelimit.Limiter
	log     *slog.Logger
	est     *estimates
	// DBTime, when set, is the database time the request of ctx has
	// spent so far (pg.MeterOf). Without it a policy of database time is
	// charged its estimates.
	DBTime func(ctx context.Context) time.Duration
	// Bypassed, when set, is told of a gated route that answered without
	// asking the gate, or whose handler named layers its Spend does not
	// say it reads (programming errors; tests fail on them).
	Bypassed func(route string)
}

// New returns the gate over the layer rules and the limiter. A nil
// limiter admits every request the rules let through, for tests of one
// capability and tools that run without limits. Each request is charged
// to its caller's identity (auth.FromContext), or to the one As names.
func New(rules access.Settings, lim *ratelimit.Limiter, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.Default()
	}
	return &Gate{rules: rules, limiter: lim, log: log, est: newEstimates()}
}

// Open is a gate with no rules and no limits: every caller may read what
// its own credentials allow, and nothing is counted.
func Open() *Gate { return New(access.Settings{}, nil, nil) }

// Check returns nil when the caller of ctx may read layer, else the 403
// to answer, the same whether the layer exists or not. Listings use it to
// leave out what a caller may not see.
func (g *Gate) Check(ctx context.Context, layer string) error { return g.rules.Check(ctx, layer) }

// CheckWrite is Check for a request that changes layer.
func (g *Gate) CheckWrite(ctx context.Context, layer string) error {
	return g.rules.CheckWrite(ctx, layer)
}

// Estimates is how many kinds of request the gate keeps an estimate of
// database time for: bounded, and grown only by requests for layers that
// exist.
func (g *Gate) Estimates() int { return g.est.len() }

// Readable says whether the caller of ctx may read layer.
func (g *Gate) Readable(ctx context.Context, layer string) bool { return g.Check(ctx, layer) == nil }

// Admit checks, admits and charges a request. The error, when not nil,
// is the answer: a 403 for a layer the caller may not reach, a 429 (with
// its RateLimit fields in the error's Header) or a 503. Admission is all
// or nothing: a request refused by one of its policies spends nothing on
// the others.
func (g *Gate) Admit(ctx context.Context, a Ask) (Pass, error) {
	rt := routeOf(ctx)
	rt.ask()
	if err := g.check(ctx, a); err != nil {
		return nil, err
	}
	policy := a.Policy
	if policy == "" {
		policy = rt.policy()
	}
	if len(a.Layers) > 0 && policy != Free && rt != nil && !rt.spend.Layers {
		g.misdeclared(rt.name)
	}
	if g.limiter == nil {
		return &pass{done: true}, nil
	}
	p := &pass{g: g, ctx: ctx, route: rt.label(), worked: len(a.Layers)}
	if g.DBTime != nil {
		// What the request's statements took before, under another
		// pass (a stream's earlier reads), is not this one's.
		p.before = g.DBTime(ctx)
	}
	cached := policy
	if a.Policy == "" {
		cached = rt.cachedPolicy(policy)
	}
	identity, tier := whoOf(ctx)
	chs := g.charges(policy, cached, a)
	if db := rt.database(a); db != "" && policy != Free {
		chs = append(chs, g.budget(db, a))
	}
	for i, ch := range chs {
		if pol, ok := g.limiter.Policy(ch.policy); ok && pol.Unit() == ratelimit.DBTime && !ch.cached {
			chs[i].dbTime = true
			chs[i].learn = learnKey(p.route, ch.policy, a)
			chs[i].cost = g.est.of(chs[i].learn, ch.weight)
		}
	}
	if err := p.reserve(chs, identity, tier); err != nil {
		p.refund()
		return nil, err
	}
	return p, nil
}

// reserve asks the limiter for every charge at once: their script runs
// travel together (in one round trip where the limiter pipelines), so a
// request that spends two policies waits for Redis about as long as one
// that spends one. The first refusal, in the charges' order, is the
// answer; what the others reserved is p's, for refund to take back.
func (p *pass) reserve(chs []charge, identity, tier string) error {
	type result struct {
		release func()
		d       ratelimit.Decision
		err     error
	}
	res := make([]result, len(chs))
	one := func(i int) {
		r := ratelimit.Request{Policy: chs[i].policy, Identity: identity, Tier: tier, Cost: chs[i].cost}
		res[i].release, res[i].d, res[i].err = p.g.limiter.Reserve(p.ctx, r)
	}
	if len(chs) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		for i := range chs {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	}
	var first error
	for i, r := range res {
		if r.err != nil {
			first = cmp.Or(first, r.err)
			continue
		}
		chs[i].decision = r.d
		p.releases = append(p.releases, r.release)
		p.charges = append(p.charges, chs[i])
	}
	return first
}

// check refuses the request when its caller may not reach one of its
// layers.
func (g *Gate) check(ctx context.Context, a Ask) error {
	check := g.rules.Check
	if a.Write {
		check = g.rules.CheckWrite
	}
	for _, ls := range [][]string{a.Layers, a.Cached} {
		for _, l := range ls {
			if err := check(ctx, l); err != nil {
				return err
			}
		}
	}
	return g.runAs(ctx, a)
}

// runAs makes the request's statements run as its caller when one of its
// layers runs as its caller (access.Rule.AsCaller), or refuses a caller
// without an accepted database role. The caller is decided here, once
// the layers are known, for every statement the request runs after.
func (g *Gate) runAs(ctx context.Context, a Ask) error {
	layers := append(slices.Clip(a.Layers), a.Cached...)
	c, ok, err := g.rules.Caller(ctx, layers...)
	if !ok || err != nil {
		return err
	}
	if err := pg.SetCaller(ctx, c); err != nil {
		// A request that cannot run as its caller must not run as the
		// login role instead.
		return apperr.Wrap(apperr.Internal, "This request could not be run as its caller.", err)
	}
	return nil
}

// Caller is the database caller of ctx on layer: nil for a layer that
// does not run as its caller, the gate's 403 for a caller with no role
// accepted. Work done for a caller beyond the route's own layers (a
// report's subscriptions) asks it.
func (g *Gate) Caller(ctx context.Context, layer string) (*pg.Caller, error) {
	c, ok, err := g.rules.Caller(ctx, layer)
	if !ok || err != nil {
		return nil, err
	}
	return &c, nil
}

// Partition is what the cached answers of layer for the caller of ctx
// are kept under (access.Settings.Partition): "" for a layer whose
// answers are everyone's, access.NoCache for answers not to cache. It
// may be asked before Admit, to look in a cache.
func (g *Gate) Partition(ctx context.Context, layer string) string {
	if !g.rules.AsCaller(layer) {
		return ""
	}
	c, _, err := g.rules.Caller(ctx, layer)
	if err != nil {
		return access.NoCache // Admit refuses such a caller
	}
	return g.rules.Partition(layer, c)
}

// misdeclared reports a route whose handler names layers, so that their
// own policies apply, while its row says it reads none: /rate_limit
// would not list the route under those policies.
func (g *Gate) misdeclared(route string) {
	g.log.Error("gate: a route named layers its row does not say it reads", "route", route)
	if g.Bypassed != nil {
		g.Bypassed(route)
	}
}

// charge is what one policy is charged for a request.
type charge struct {
	policy string
	cost   int // reserved, in the policy's unit
	// weight is the sum of the multipliers of the layers charged here
	// (1 without layers): a measured cost counts that many times.
	weight int
	// cached says the charge is for layers served from a cache, which
	// did no work on the database.
	cached bool
	// dbTime says the policy counts database time; learn is the key its
	// estimate is learned under.
	dbTime   bool
	learn    kind
	decision ratelimit.Decision
	// actual is what the charge was settled at; 0 until it is.
	actual int
}

// shown is the charge's decision as its answer shows it: once settled,
// each window holds the true cost in place of the reservation.
func (ch charge) shown() ratelimit.Decision {
	d := ch.decision
	delta := ch.actual - ch.cost
	if ch.actual == 0 || delta == 0 {
		return d
	}
	d.Windows = slices.Clone(d.Windows)
	for i := range d.Windows {
		w := &d.Windows[i]
		w.Used = max(0, w.Used+delta)
		w.Remaining = max(0, w.Limit-w.Used)
	}
	return d
}

// charges groups a request's cost by policy: each worked layer's own
// policy and multiplier apply to its share, cached layers spend the
// cached policy; a request that names no layer spends policy once. A
// Free policy charges nothing, not even a layer's own.
func (g *Gate) charges(policy, cached string, a Ask) []charge {
	cost := max(a.Cost, 1)
	if len(a.Layers) == 0 && len(a.Cached) == 0 {
		if policy == Free {
			return nil
		}
		return []charge{{policy: policy, cost: cost, weight: 1}}
	}
	var out []charge
	add := func(p string, n int, isCached bool) {
		if p == Free {
			return
		}
		i := 0
		for i < len(out) && (out[i].policy != p || out[i].cached != isCached) {
			i++
		}
		if i == len(out) {
			out = append(out, charge{policy: p, cached: isCached})
		}
		out[i].cost += n
		out[i].weight += n / cost
	}
	for _, l := range a.Layers {
		p, n := g.rules.Limit(l, policy, cost)
		if policy == Free {
			p = Free
		}
		add(p, n, false)
	}
	for _, l := range a.Cached {
		_, n := g.rules.Limit(l, cached, cost)
		add(cached, n, true)
	}
	return out
}

// budget is the charge of the identity's database budget: the request's
// whole work, each worked layer's share counted its multiplier times.
func (g *Gate) budget(policy string, a Ask) charge {
	ch := charge{policy: policy, cost: 1, weight: 1}
	if len(a.Layers) > 0 {
		ch.weight = 0
		for _, l := range a.Layers {
			_, n := g.rules.Limit(l, policy, 1)
			ch.weight += n
		}
		ch.cost = ch.weight
	}
	return ch
}

// pass is the gate's Pass.
type pass struct {
	g        *Gate
	ctx      context.Context
	route    string
	worked   int           // the layers worked on the database
	before   time.Duration // the request's database time at admission
	releases []func()
	charges  []charge
	usage    Usage
	settled  bool
	done     bool
}

// Header is the RateLimit fields of every policy the pass charged, one
// list item per window; the legacy single-window fields name the window
// of the route's own policy closest to exhaustion (the windows of
// different policies count different units). A pass that charged
// nothing has none.
func (p *pass) Header() http.Header {
	if len(p.charges) == 0 {
		return nil
	}
	h := p.charges[0].shown().Header()
	if len(p.charges) == 1 {
		return h
	}
	all := ratelimit.Decision{Allowed: true}
	for _, ch := range p.charges {
		all.Windows = append(all.Windows, ch.shown().Windows...)
	}
	if len(all.Windows) > 0 {
		// As http.Header.Set would canonicalize them.
		h["Ratelimit-Policy"] = []string{all.PolicyField()}
		h["Ratelimit"] = []string{all.RemainingField()}
	}
	return h
}

func (p *pass) Spent(u Usage) { p.usage = u }

func (p *pass) Settle() {
	if p.settled || p.done {
		return
	}
	p.settled = true
	p.settle()
}

// Done settles what the request really cost, unless Settle did, and
// releases what it held (in-flight slots); call it once the request has
// been answered.
func (p *pass) Done() {
	if p.done {
		return
	}
	p.Settle()
	p.done = true
	p.release()
}

// refund takes back what the charges made so far reserved, for a request
// refused by a later policy, and releases them.
func (p *pass) refund() {
	ctx := context.WithoutCancel(p.ctx)
	for _, ch := range p.charges {
		if err := p.g.limiter.Refund(ctx, ch.decision); err != nil {
			p.g.log.Warn("gate: a refused request's reservation was not refunded", "policy", ch.policy, "err", err.Error())
		}
	}
	p.release()
}

func (p *pass) release() {
	rs := p.releases
	p.releases = nil
	for _, r := range rs {
		r()
	}
}
