package gate

import (
	"context"
	"slices"
	"sync/atomic"
)

// Spend is what a gated route spends, as its row in the route table says:
// each row alone says all of it.
type Spend struct {
	// Policy is spent for the route's work; Free: the gate checks the
	// layers but charges nothing.
	Policy string
	// Cached, when set, is spent instead of Policy for what the handler
	// serves from a cache (Ask.Cached): a tile found in the tile cache.
	Cached string
	// Database, when set, is the policy of database time the route's work
	// on PostgreSQL also spends, beside Policy: the identity's one budget
	// of the database, which every route that runs statements shares. A
	// request that serves only cached layers does not spend it.
	Database string
	// Layers says the handler names the layers it reads or writes, and
	// so a layer's own policy (the layer file's) may take the place of
	// Policy for that layer's share. A handler that names layers on a
	// route that does not say so is reported, as a bypass is.
	Layers bool
}

// Policies are the policies s may charge, each once.
func (s Spend) Policies() []string {
	var out []string
	for _, p := range []string{s.Policy, s.Cached, s.Database} {
		if p != Free && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// cached is the policy what the route serves from a cache spends.
func (s Spend) cached() string {
	if s.Cached != "" {
		return s.Cached
	}
	return s.Policy
}

// Route is what the gate knows of the request in flight on a gated
// route: its name, what its row says it spends, and whether its handler
// has asked the gate.
type Route struct {
	name  string
	spend Spend
	asked atomic.Bool
}

type routeKey struct{}

// WithRoute marks the request of ctx as one of the gated route name,
// spending s. Its handler must call Admit before it answers with
// success; Finish, called once it has answered, reports one that did not.
func WithRoute(ctx context.Context, name string, s Spend) (context.Context, *Route) {
	rt := &Route{name: name, spend: s}
	return context.WithValue(ctx, routeKey{}, rt), rt
}

func routeOf(ctx context.Context) *Route {
	rt, _ := ctx.Value(routeKey{}).(*Route)
	return rt
}

// ask records that the route's handler asked the gate.
func (rt *Route) ask() {
	if rt != nil {
		rt.asked.Store(true)
	}
}

// policy is the policy the route's work spends; Free off a route.
func (rt *Route) policy() string {
	if rt == nil {
		return Free
	}
	return rt.spend.Policy
}

// cachedPolicy is what the route's cached answers spend, given the policy
// its work spends.
func (rt *Route) cachedPolicy(policy string) string {
	if rt == nil {
		return policy
	}
	return rt.spend.cached()
}

// database is the budget of database time a on this route spends; ""
// for none, and for a request that serves only cached layers.
func (rt *Route) database(a Ask) string {
	if rt == nil || len(a.Layers) == 0 && len(a.Cached) > 0 {
		return ""
	}
	return rt.spend.Database
}

func (rt *Route) label() string {
	if rt == nil {
		return ""
	}
	return rt.name
}

// Finish reports a gated route whose handler answered with status, a
// success, without asking the gate: so that a route added without the
// gate cannot serve a layer unchecked without a test noticing.
func (g *Gate) Finish(rt *Route, status int) {
	if rt.asked.Load() || status >= 400 {
		return
	}
	g.log.Error("gate: a gated route answered without asking the gate", "route", rt.name, "status", status)
	if g.Bypassed != nil {
		g.Bypassed(rt.name)
	}
}

type asKey struct{ identity, tier string }

// As returns ctx for work done on behalf of identity in tier with no
// request of its own (a webhook delivery for a subscription's owner):
// the gate charges that identity, whoever the caller of ctx is.
func As(ctx context.Context, identity, tier string) context.Context {
	return context.WithValue(ctx, asKey{}, asKey{identity, tier})
}

// whoOf is who the gate charges for the work of ctx: the identity As
// named, else the caller's.
func whoOf(ctx context.Context) (identity, tier string) {
	if a, ok := ctx.Value(asKey{}).(asKey); ok {
		return a.identity, a.tier
	}
	return limitedAs(ctx)
}
