// Package gate is the one place a request is checked, admitted and
// charged. A handler calls Admit with the layers the request reads or
// writes, once it knows them: the gate checks that the caller may reach
// each of them, picks each layer's rate-limit policy and cost, admits the
// request against the limiter, and hands back a Pass. When the work is
// done the handler settles the Pass with what the request really cost,
// and releases it.
//
// The route a request came in on names its policy through Route, which
// also notices a route whose handler answered without asking the gate.
package gate

import (
	"context"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/ratelimit"
)

// Free is the policy of a route that the gate checks but never charges.
const Free = ""

// Ask is what a request asks of the gate.
type Ask struct {
	// Layers are the layers the request reads or writes; none for a
	// request that reads no layer (a document about the service).
	Layers []string
	// Write says the request changes the layers; it needs what a read
	// needs (the route's scope asks for the write scope).
	Write bool
	// Policy, when set, is spent instead of the route's.
	Policy string
	// Cached says what is asked is served from a cache or from memory:
	// the route's cached policy (Spend.Cached) applies, if it has one,
	// and the layers' own policies, which are for work on the database,
	// do not.
	Cached bool
	// Cost is the estimated cost per layer in the policy's units, before
	// each layer's multiplier; 0 is 1.
	Cost int
	// Size names how big the request is (a zoom, a page size), for the
	// estimates of database time learned from requests like it; "" is
	// Cost.
	Size string
}

// Pass is an admitted request. Spent tells it what the request really
// cost, when the handler knows better than its estimate; Done settles the
// true cost (what Spent said, and the database time measured) and
// releases what the request holds. Call Done once it has been answered;
// more calls do nothing.
type Pass interface {
	Spent(Usage)
	Done()
}

// Usage is what a request really cost, as its handler measured it.
type Usage struct {
	// Cost is the true cost in the units the estimate (Ask.Cost) was in;
	// 0 keeps the estimate.
	Cost int
}

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

// pass is the gate's Pass.
type pass struct {
	g        *Gate
	ctx      context.Context
	route    string
	releases []func()
	charges  []charge
	usage    Usage
	done     bool
}

// Gate admits requests. Its zero value is not usable; see New.
type Gate struct {
	rules   access.Settings
	limiter *ratelimit.Limiter
	caller  ratelimit.Caller
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
// capability and tools that run without limits.
func New(rules access.Settings, lim *ratelimit.Limiter, caller ratelimit.Caller, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.Default()
	}
	return &Gate{rules: rules, limiter: lim, caller: caller, log: log, est: newEstimates()}
}

// Open is a gate with no rules and no limits: every caller may read what
// its own credentials allow, and nothing is counted.
func Open() *Gate { return New(access.Settings{}, nil, nil, nil) }

// Check returns nil when the caller of ctx may read layer, else the 403
// to answer, the same whether the layer exists or not. Listings use it to
// leave out what a caller may not see.
func (g *Gate) Check(ctx context.Context, layer string) error { return g.rules.Check(ctx, layer) }

// Readable says whether the caller of ctx may read layer.
func (g *Gate) Readable(ctx context.Context, layer string) bool { return g.Check(ctx, layer) == nil }

// Admit checks, admits and charges a request. When it returns ok false
// the answer (403, 429 or 503) has been written and the handler returns.
func (g *Gate) Admit(c *gin.Context, a Ask) (Pass, bool) {
	st := stateOf(c)
	if st != nil {
		st.asked = true
	}
	ctx := c.Request.Context()
	check := g.rules.Check
	if a.Write {
		check = g.rules.CheckWrite
	}
	for _, l := range a.Layers {
		if err := check(ctx, l); err != nil {
			httpx.Abort(c, err)
			return nil, false
		}
	}
	policy := a.Policy
	route := ""
	if st != nil {
		route = st.route
		if policy == "" {
			policy = st.spend.policy(a)
		}
		if len(a.Layers) > 0 && !a.Cached && !st.spend.Layers && policy != Free {
			g.misdeclared(route)
		}
	}
	if policy == Free || g.limiter == nil {
		return &pass{done: true}, true
	}
	p := &pass{g: g, ctx: ctx, route: route}
	for _, ch := range g.charges(policy, a) {
		if pol, ok := g.limiter.Policy(ch.policy); ok && pol.Unit() == ratelimit.DBTime {
			ch.dbTime = true
			ch.learn = learnKey(route, ch, a)
			ch.cost = g.est.of(ch.learn, ch.weight)
		}
		release, d, ok := g.limiter.Reserve(c, ch.policy, ch.cost, g.caller)
		if !ok {
			p.release()
			return nil, false
		}
		ch.decision = d
		p.releases = append(p.releases, release)
		p.charges = append(p.charges, ch)
	}
	return p, true
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
	// weight is the sum of the layers' multipliers (1 without layers):
	// a measured cost counts that many times.
	weight int
	// dbTime says the policy counts database time; learn is the key its
	// estimate is learned under.
	dbTime   bool
	learn    string
	decision ratelimit.Decision
}

// charges groups a request's cost by policy: each layer's own policy
// (unless cached) and multiplier apply to its share; a request that reads
// no layer spends the route's policy once.
func (g *Gate) charges(policy string, a Ask) []charge {
	cost := max(a.Cost, 1)
	if len(a.Layers) == 0 {
		return []charge{{policy: policy, cost: cost, weight: 1}}
	}
	var out []charge
	for _, l := range a.Layers {
		p, n := g.rules.Limit(l, policy, cost)
		if a.Cached {
			p = policy
		}
		i := 0
		for i < len(out) && out[i].policy != p {
			i++
		}
		if i == len(out) {
			out = append(out, charge{policy: p})
		}
		out[i].cost += n
		out[i].weight += n / cost
	}
	return out
}

func (p *pass) Spent(u Usage) { p.usage = u }

// Done settles what the request really cost and releases what it held
// (in-flight slots); call it once the request has been answered.
func (p *pass) Done() {
	if p.done {
		return
	}
	p.done = true
	p.settle()
	p.release()
}

func (p *pass) release() {
	rs := p.releases
	p.releases = nil
	for _, r := range rs {
		r()
	}
}
