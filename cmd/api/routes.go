package main

import (
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/web"
)

type (
	pgPool      = *pgxpool.Pool
	redisClient = redis.UniversalClient
)

// route is one endpoint: what a request must present and what it costs
// before its handler runs, as a FastAPI route declares its dependencies.
type route struct {
	method, path string
	// scope is the scope a caller needs: a scope name, anyone (any caller
	// whose credentials, if any, are valid), public (no authentication) or
	// nobody (the method is not allowed: 405, before any credentials are
	// checked, and left out of the API description).
	scope   string
	limit   limit
	handler gin.HandlerFunc
}

// refuse is the route that answers method on path with a 405 naming the
// methods allowed there, where a parameter route would otherwise take it.
func refuse(method, path, allow string) route {
	return route{method, path, nobody, free, httpx.MethodNotAllowed(allow)}
}

// Route scopes that name no auth scope.
const (
	anyone = ""
	public = "public"
	nobody = "nobody"
)

// limit is the rate-limit policy a route spends and what a request costs.
type limit struct {
	policies []string
	cost     func(*gin.Context) int // nil: 1
	// inHandler says the handler charges the policies itself (a tile
	// spends one or the other), rather than a middleware before it.
	inHandler bool
	// layer, when set, is the layer a request reads unless its layer
	// parameter names another: the caller must be allowed to read it, and
	// its rules may change the policy and the cost.
	layer string
}

// free spends no budget.
var free = limit{}

func spend(policy string, cost func(*gin.Context) int) limit {
	return limit{policies: []string{policy}, cost: cost}
}

func inHandler(policies ...string) limit { return limit{policies: policies, inHandler: true} }

// spendOn is spend for a route that reads one layer, def unless the
// request names another.
func spendOn(def, policy string, cost func(*gin.Context) int) limit {
	return limit{policies: []string{policy}, cost: cost, layer: def}
}

// fromPath, as a limit's layer, says the layer is the route's
// collectionId path parameter.
const fromPath = ":collectionId"

// spendOnCollection is spend for an OGC API route of one collection.
func spendOnCollection(policy string, cost func(*gin.Context) int) limit {
	return limit{policies: []string{policy}, cost: cost, layer: fromPath}
}

// routes lists every route of the service.
func routes(s *services) []route {
	geo, t, docs, f, ad := s.geofence, s.tiles, s.docs, s.features, s.admin
	q := &quotas{s: s}
	rs := []route{
		{"GET", "/healthz", public, free, s.health.Live},
		{"GET", "/readyz", public, free, s.health.Ready},
		{"GET", "/metrics", public, free, s.metrics()},

		{"GET", "/", anyone, spend(policyFeatures, nil), f.Landing(web.Map)},
		{"GET", "/static/*filepath", anyone, free, web.Static},
		{"GET", "/openapi.json", anyone, free, docs.Spec},
		{"GET", "/api", anyone, free, docs.ServiceDesc},
		{"GET", "/docs", anyone, free, docs.SwaggerUI},
		{"GET", "/redoc", anyone, free, docs.Redoc},
		{"GET", "/docs/assets/*filepath", anyone, free, docs.Asset},

		{"GET", "/layers", anyone, free, s.catalog.List(s.readable)},
		// The caller's quotas: reading them spends none, only rate-limit.
		{"GET", "/rate_limit", anyone, spend(policyRateLimit, nil), q.serve},

		{"GET", "/within", auth.ScopeProximityRead, spendOn("places", policyGeofence, geo.WithinCost), geo.Within},
		{"GET", "/geofences", auth.ScopeGeofencesRead, spend(policyGeofence, nil), geo.List},
		{"POST", "/geofences", auth.ScopeGeofencesWrite, spend(policyGeofence, nil), geo.Create},
		{"GET", "/geofences/contains", auth.ScopeGeofencesRead, spendOn("geofences", policyGeofence, nil), geo.Contains},
		{"POST", "/geofences/contains", auth.ScopeGeofencesRead, spendOn("geofences", policyGeofence, nil), geo.ContainsBatch},
		refuse("PUT", "/geofences/contains", "GET, POST"), // no fence is called "contains"
		refuse("DELETE", "/geofences/contains", "GET, POST"),
		{"GET", "/geofences/:id", auth.ScopeGeofencesRead, spend(policyGeofence, nil), geo.Get},
		{"PUT", "/geofences/:id", auth.ScopeGeofencesWrite, spend(policyGeofence, nil), geo.Update},
		{"DELETE", "/geofences/:id", auth.ScopeGeofencesWrite, spend(policyGeofence, nil), geo.Delete},

		{"GET", "/conformance", anyone, spend(policyFeatures, nil), f.Conformance},
		{"GET", "/collections", anyone, spend(policyFeatures, nil), f.Collections},
		{"GET", "/collections/:collectionId", anyone, spendOnCollection(policyFeatures, nil), f.Collection},
		{"GET", "/collections/:collectionId/queryables", anyone, spendOnCollection(policyFeatures, nil), f.Queryables},
		{"GET", "/collections/:collectionId/schema", anyone, spendOnCollection(policyFeatures, nil), f.Schema},
		{"GET", "/collections/:collectionId/items", auth.ScopeFeaturesRead, spendOnCollection(policyFeatures, f.PageCost), f.Items},
		{"GET", "/collections/:collectionId/items/:featureId", auth.ScopeFeaturesRead, spendOnCollection(policyFeatures, nil), f.Item},

		{"GET", "/tiles", auth.ScopeTilesRead, free, t.List},
		{"GET", "/tiles/:layer", auth.ScopeTilesRead, free, t.TileJSON}, // {layer}.json
		{"GET", "/tiles/:layer/:z/:x/:y", auth.ScopeTilesRead, inHandler(policyTiles, policyTilesCached), t.Tile},

		// OGC API - Tiles and Styles over the same layers and tiles. The
		// documents cost a unit of tiles-cached, as a cached tile does.
		{"GET", "/tileMatrixSets", auth.ScopeTilesRead, spend(policyTilesCached, nil), t.TileMatrixSets},
		{"GET", "/tileMatrixSets/:tileMatrixSetId", auth.ScopeTilesRead, spend(policyTilesCached, nil), t.TileMatrixSet},
		{"GET", "/collections/:collectionId/tiles", auth.ScopeTilesRead, spend(policyTilesCached, nil), t.TileSets},
		{"GET", "/collections/:collectionId/tiles/:tileMatrixSetId", auth.ScopeTilesRead, spend(policyTilesCached, nil), t.TileSet},
		{"GET", "/collections/:collectionId/tiles/:tileMatrixSetId/:tileMatrix/:tileRow/:tileCol", auth.ScopeTilesRead, inHandler(policyTiles, policyTilesCached), t.OGCTile},
		{"GET", "/styles", auth.ScopeTilesRead, spend(policyTilesCached, nil), t.Styles},
		{"GET", "/styles/:styleId", auth.ScopeTilesRead, spend(policyTilesCached, nil), t.Style},

		// Key administration. Only operators hold the admin scope, and
		// the scope is checked before anything else runs; the routes are
		// a few indexed statements each and spend no budget, so that a
		// caller's spatial budget never stands between an operator and a
		// revocation.
		{"GET", "/admin/keys", auth.ScopeAdmin, free, ad.List},
		{"POST", "/admin/keys", auth.ScopeAdmin, free, ad.Create},
		{"GET", "/admin/keys/:id", auth.ScopeAdmin, free, ad.Get},
		{"PATCH", "/admin/keys/:id", auth.ScopeAdmin, free, ad.Update},
		{"DELETE", "/admin/keys/:id", auth.ScopeAdmin, free, ad.Revoke},
		{"POST", "/admin/keys/:id/rotate", auth.ScopeAdmin, free, ad.Rotate},
		{"GET", "/admin/keys/:id/usage", auth.ScopeAdmin, free, ad.Usage},
		{"GET", "/admin/tiers", auth.ScopeAdmin, free, ad.ListTiers},
		{"GET", "/admin/tiers/:tier", auth.ScopeAdmin, free, ad.GetTier},
		{"PUT", "/admin/tiers/:tier", auth.ScopeAdmin, free, ad.PutTier},
		{"DELETE", "/admin/tiers/:tier", auth.ScopeAdmin, free, ad.DeleteTier},
		{"GET", "/admin/audit", auth.ScopeAdmin, free, ad.Audit},
	}
	q.guardedBy(rs)
	return rs
}

// newRouter serves rs: each handler behind authentication (unless
// public), its scope check and its rate limit.
func newRouter(cfg config.Config, log *slog.Logger, s *services, rs []route) (*gin.Engine, error) {
	r := httpx.NewRouter(log, httpx.NewMetrics(s.registry), cfg.Server.TrustedProxies)
	r.Use(httpx.CORS(cfg.Server.CORSOrigins, []string{"RateLimit", "RateLimit-Policy", "RateLimit-Limit",
		"RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "X-Request-ID", "X-Cache", "ETag", "Link"}))
	authn := s.authn.Middleware()
	for _, rt := range rs {
		var chain []gin.HandlerFunc
		switch rt.scope {
		case public, nobody:
		case anyone:
			chain = append(chain, authn)
		default:
			chain = append(chain, authn, auth.Require(rt.scope))
		}
		for _, p := range rt.limit.policies {
			if _, ok := s.limiter.Policy(p); !ok {
				return nil, fmt.Errorf("route %s %s: rate-limit policy %q is not configured", rt.method, rt.path, p)
			}
		}
		switch {
		case rt.limit.layer != "":
			chain = append(chain, s.layerLimit(rt.limit.policies[0], rt.limit.layer, rt.limit.cost))
		case len(rt.limit.policies) == 1 && !rt.limit.inHandler:
			chain = append(chain, s.limiter.Middleware(rt.limit.policies[0], rt.limit.cost, limitedAs))
		}
		// After the limit, so that a refused request costs no look-up.
		if s.floors != nil && rt.scope != public && rt.scope != nobody {
			chain = append(chain, s.readFloor)
		}
		r.Handle(rt.method, rt.path, append(chain, rt.handler)...)
	}
	return r, nil
}
