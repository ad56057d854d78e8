package access

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/pg"
)

// errNoRole refuses a caller without an accepted database role a layer
// that runs as its caller. It names no role: which roles exist, and
// which are accepted, is the operator's business.
var errNoRole = pg.ErrCallerRole

// AsCaller reports whether any of layers runs as its caller.
func (s Settings) AsCaller(layers ...string) bool {
	return slices.ContainsFunc(layers, func(l string) bool { return s.Layers[l].AsCaller })
}

// Caller is who the statements of a request on layers run as: ok false
// when none of them runs as its caller (the login role serves them),
// else the caller of ctx as its accepted database role, or the 403 to
// answer when it has none.
func (s Settings) Caller(ctx context.Context, layers ...string) (c pg.Caller, ok bool, err error) {
	if !s.AsCaller(layers...) {
		return pg.Caller{}, false, nil
	}
	id := auth.FromContext(ctx)
	if id.Anonymous || id.DBRole == "" || !slices.Contains(s.CallerRoles, id.DBRole) {
		return pg.Caller{}, true, errNoRole
	}
	c = pg.Caller{Role: id.DBRole, Claims: id.ClaimsJSON(), Identity: id.LimitKey()}
	if id.Kind == auth.KindKey {
		c.Key = id.ID
	}
	return c, true, nil
}

// Partition is what the cached answers of layer for the caller c are kept
// under: "" for a layer whose answers are the same for everyone, "-" for
// one whose answers must not be cached (an AsCaller layer without
// CacheBy), else the role and, for CacheByClaim, the claim's value as
// JSON (null when the caller has none: such callers see the same rows).
func (s Settings) Partition(layer string, c pg.Caller) string {
	r := s.Layers[layer]
	if !r.AsCaller {
		return ""
	}
	switch {
	case r.CacheBy == CacheByRole:
		return c.Role
	case strings.HasPrefix(r.CacheBy, CacheByClaim):
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(c.Claims), &m)
		v := m[strings.TrimPrefix(r.CacheBy, CacheByClaim)]
		if v == nil {
			v = json.RawMessage("null")
		}
		return c.Role + "|" + string(v)
	}
	return NoCache
}

// NoCache is the Partition of answers that must not be cached.
const NoCache = "-"
