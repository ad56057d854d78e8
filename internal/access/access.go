// Package access decides, per layer, who may read it and what reading it
// costs: the scopes a layer asks for and the rate-limit policy and cost
// it spends, from the layer file, together with the layers a caller's key
// or token is limited to.
package access

import (
	"context"
	"slices"

	"github.com/geogate/geogate/internal/auth"
)

// Rule is what one layer asks of its callers; the zero Rule asks nothing.
type Rule struct {
	// Scopes, when there are any, are the scopes of which a caller must
	// hold one to read the layer on any route, besides the route's own.
	Scopes []string
	// Policy, when set, is the rate-limit policy that queries and tile
	// renders of the layer spend instead of the route's (cached tiles
	// keep theirs).
	Policy string
	// Cost multiplies what a request of the layer costs; 0 is 1.
	Cost int
	// AsCaller runs the layer's statements as the caller's database role,
	// with its claims, so that the table's row-level security decides
	// which rows each caller gets (see Caller).
	AsCaller bool
	// CacheBy says what of the caller the rows of an AsCaller layer
	// depend on, so that what is cached of them (tiles, counts, extents)
	// is kept per that: CacheByRole, or CacheByClaim followed by a claim's
	// name. "" caches nothing of the layer.
	CacheBy string
}

// The values of Rule.CacheBy.
const (
	CacheByRole  = "role"
	CacheByClaim = "claim:"
)

// Settings are the rules per layer id.
type Settings struct {
	Layers map[string]Rule
	// CallerRoles are the database roles a caller may run as
	// (DB_CALLER_ROLES): a key's db_role or a token's role claim that is
	// not among them is refused.
	CallerRoles []string
}

// Check returns nil when the caller of ctx may read layer, else the 403
// to answer: the layers the caller's key or token is limited to come
// first, so that such a caller learns nothing of layers outside them, not
// even whether they exist.
func (s Settings) Check(ctx context.Context, layer string) error {
	if err := auth.CheckLayer(ctx, layer); err != nil {
		return err
	}
	return s.checkScopes(ctx, layer, "read")
}

// CheckWrite is Check for a request that changes layer: it needs what a
// read needs, and a refusal says it was a write.
func (s Settings) CheckWrite(ctx context.Context, layer string) error {
	if err := auth.CheckLayerWrite(ctx, layer); err != nil {
		return err
	}
	return s.checkScopes(ctx, layer, "write")
}

// checkScopes refuses layer to a caller without one of the scopes the
// layer file asks for it, with the answer a layer outside the caller's
// list gets (auth.RefuseLayer): naming the scopes would tell a caller
// which layers are protected, and by what. verb names what was asked.
func (s Settings) checkScopes(ctx context.Context, layer, verb string) error {
	r := s.Layers[layer]
	if len(r.Scopes) > 0 && !slices.ContainsFunc(r.Scopes, auth.FromContext(ctx).Has) {
		return auth.RefuseLayer(layer, verb)
	}
	return nil
}

// Limit is the policy and cost a request of layer spends, where the route
// would spend cost from policy.
func (s Settings) Limit(layer, policy string, cost int) (string, int) {
	r := s.Layers[layer]
	if r.Policy != "" {
		policy = r.Policy
	}
	if r.Cost > 1 {
		cost *= r.Cost
	}
	return policy, cost
}
