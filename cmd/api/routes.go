package main

import (
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/web"
)

type (
	pgPool      = *pgxpool.Pool
	redisClient = redis.UniversalClient
)

// route is one endpoint: what a request must present and the policy it
// spends, as a FastAPI route declares its dependencies. The handler asks
// the gate itself, with the layers the request reads or writes, once it
// knows them; the router only names the route's policy to the gate.
type route struct {
	method, path string
	// scope is the scope a caller needs: a scope name, anyone (any caller
	// whose credentials, if any, are valid), public (no authentication) or
	// nobody (the method is not allowed: 405, before any credentials are
	// checked, and left out of the API description).
	scope string
	// policy is what the route spends (see gate.Spend): its rate-limit
	// policy, the one a cached answer spends instead, and whether a
	// layer's own policy may take its place; free when the gate checks it
	// but charges nothing, ungated for a route that reads no layer and
	// spends nothing.
	policy  gate.Spend
	handler gin.HandlerFunc
}

// refuse is the route that answers method on path with a 405 naming the
// methods allowed there, where a parameter route would otherwise take it.
func refuse(method, path, allow string) route {
	return route{method, path, nobody, ungated, httpx.MethodNotAllowed(allow)}
}

// Route scopes that name no auth scope.
const (
	anyone = ""
	public = "public"
	nobody = "nobody"
)

// What the routes spend.
var (
	// free: the gate checks the layers but charges nothing.
	free = gate.Spend{Policy: gate.Free}
	// ungated: the route never asks the gate (the name is no policy's).
	ungated = gate.Spend{Policy: "ungated"}

	// The OGC API - Features documents about the service, and the routes
	// of one collection.
	spendFeatures      = gate.Spend{Policy: config.PolicyFeatures, Database: config.PolicyDatabase}
	spendFeaturesLayer = gate.Spend{Policy: config.PolicyFeatures, Database: config.PolicyDatabase, Layers: true}
	// /within and every geofence route.
	spendGeofence = gate.Spend{Policy: config.PolicyGeofence, Database: config.PolicyDatabase, Layers: true}
	// A tile spends tiles for the layers it renders and tiles-cached for
	// those it finds in the cache; a render also spends the database
	// budget, a tile served whole from the cache does not.
	spendTiles = gate.Spend{Policy: config.PolicyTiles, Cached: config.PolicyTilesCached, Database: config.PolicyDatabase, Layers: true}
	// The OGC API - Tiles and Styles documents cost a unit of
	// tiles-cached, as a cached tile does.
	spendTilesCached = gate.Spend{Policy: config.PolicyTilesCached}
	spendRateLimit   = gate.Spend{Policy: config.PolicyRateLimit}
	// A batch of positions costs what it holds; the subscription and
	// event routes that name a subscription's layer check it.
	spendPositions   = gate.Spend{Policy: config.PolicyPositions, Database: config.PolicyDatabase}
	spendEvents      = gate.Spend{Policy: config.PolicyEvents, Database: config.PolicyDatabase}
	spendEventsLayer = gate.Spend{Policy: config.PolicyEvents, Database: config.PolicyDatabase, Layers: true}
)

// routes lists every route of the service.
func routes(s *services) []route {
	geo, t, docs, f, ev, ad := s.geofence, s.tiles, s.docs, s.features, s.events, s.admin
	rs := []route{
		{"GET", "/healthz", public, ungated, s.health.Live},
		{"GET", "/readyz", public, ungated, s.health.Ready},
		{"GET", "/metrics", public, ungated, s.metrics()},

		{"GET", "/", anyone, spendFeatures, f.Landing(web.Map)},
		{"GET", "/static/*filepath", anyone, ungated, web.Static},
		{"GET", "/favicon.ico", public, ungated, web.Favicon},
		{"GET", "/openapi.json", anyone, ungated, docs.Spec},
		{"GET", "/api", anyone, ungated, docs.ServiceDesc},
		{"GET", "/docs", anyone, ungated, docs.SwaggerUI},
		{"GET", "/redoc", anyone, ungated, docs.Redoc},
		{"GET", "/docs/assets/*filepath", anyone, ungated, docs.Asset},

		{"GET", "/layers", anyone, free, s.layers.List},
		// The caller's quotas: reading them spends none, only rate-limit.
		{"GET", "/rate_limit", anyone, spendRateLimit, s.quotas.Serve},

		{"GET", "/within", auth.ScopeProximityRead, spendGeofence, geo.Within},
		{"GET", "/geofences", auth.ScopeGeofencesRead, spendGeofence, geo.List},
		{"POST", "/geofences", auth.ScopeGeofencesWrite, spendGeofence, geo.Create},
		{"GET", "/geofences/contains", auth.ScopeGeofencesRead, spendGeofence, geo.Contains},
		{"POST", "/geofences/contains", auth.ScopeGeofencesRead, spendGeofence, geo.ContainsBatch},
		refuse("PUT", "/geofences/contains", "GET, POST"), // no fence is called "contains"
		refuse("DELETE", "/geofences/contains", "GET, POST"),
		{"GET", "/geofences/:id", auth.ScopeGeofencesRead, spendGeofence, geo.Get},
		{"PUT", "/geofences/:id", auth.ScopeGeofencesWrite, spendGeofence, geo.Update},
		{"DELETE", "/geofences/:id", auth.ScopeGeofencesWrite, spendGeofence, geo.Delete},

		// Geofence events: devices' positions in, subscriptions' events
		// out. Each identity sees only its own devices and subscriptions.
		{"POST", "/positions", auth.ScopePositionsWrite, spendPositions, ev.Report},
		{"GET", "/positions", auth.ScopeEventsRead, spendEvents, ev.Positions},
		{"GET", "/devices", auth.ScopeEventsRead, spendEvents, ev.Devices},
		{"GET", "/subscriptions", auth.ScopeEventsRead, spendEvents, ev.Subscriptions},
		{"POST", "/subscriptions", auth.ScopeEventsWrite, spendEventsLayer, ev.CreateSubscription},
		{"GET", "/subscriptions/:id", auth.ScopeEventsRead, spendEventsLayer, ev.Subscription},
		{"PATCH", "/subscriptions/:id", auth.ScopeEventsWrite, spendEventsLayer, ev.UpdateSubscription},
		{"DELETE", "/subscriptions/:id", auth.ScopeEventsWrite, spendEvents, ev.DeleteSubscription},
		{"POST", "/subscriptions/:id/secret", auth.ScopeEventsWrite, spendEventsLayer, ev.RotateSecret},
		{"GET", "/events", auth.ScopeEventsRead, spendEventsLayer, ev.Events},
		// A live stream is admitted once, at connect.
		{"GET", "/events/stream", auth.ScopeEventsRead, spendEventsLayer, ev.Stream},

		{"GET", "/conformance", anyone, spendFeatures, f.Conformance},
		{"GET", "/collections", anyone, spendFeatures, f.Collections},
		{"GET", "/collections/:collectionId", anyone, spendFeaturesLayer, f.Collection},
		{"GET", "/collections/:collectionId/queryables", anyone, spendFeaturesLayer, f.Queryables},
		{"GET", "/collections/:collectionId/schema", anyone, spendFeaturesLayer, f.Schema},
		{"GET", "/collections/:collectionId/items", auth.ScopeFeaturesRead, spendFeaturesLayer, f.Items},
		{"GET", "/collections/:collectionId/items/:featureId", auth.ScopeFeaturesRead, spendFeaturesLayer, f.Item},
		// OGC API - Features Part 4, on the layers the layer file opens
		// for writing.
		{"POST", "/collections/:collectionId/items", auth.ScopeFeaturesWrite, spendFeaturesLayer, f.CreateItem},
		{"PUT", "/collections/:collectionId/items/:featureId", auth.ScopeFeaturesWrite, spendFeaturesLayer, f.ReplaceItem},
		{"PATCH", "/collections/:collectionId/items/:featureId", auth.ScopeFeaturesWrite, spendFeaturesLayer, f.UpdateItem},
		{"DELETE", "/collections/:collectionId/items/:featureId", auth.ScopeFeaturesWrite, spendFeaturesLayer, f.DeleteItem},

		{"GET", "/tiles", auth.ScopeTilesRead, free, t.List},
		{"GET", "/tiles/:layer", auth.ScopeTilesRead, free, t.TileJSON}, // {layer}.json
		{"GET", "/tiles/:layer/:z/:x/:y", auth.ScopeTilesRead, spendTiles, t.Tile},

		// OGC API - Tiles and Styles serve the same layers and tiles.
		{"GET", "/tileMatrixSets", auth.ScopeTilesRead, spendTilesCached, t.TileMatrixSets},
		{"GET", "/tileMatrixSets/:tileMatrixSetId", auth.ScopeTilesRead, spendTilesCached, t.TileMatrixSet},
		{"GET", "/collections/:collectionId/tiles", auth.ScopeTilesRead, spendTilesCached, t.TileSets},
		{"GET", "/collections/:collectionId/tiles/:tileMatrixSetId", auth.ScopeTilesRead, spendTilesCached, t.TileSet},
		{"GET", "/collections/:collectionId/tiles/:tileMatrixSetId/:tileMatrix/:tileRow/:tileCol", auth.ScopeTilesRead, spendTiles, t.OGCTile},
		{"GET", "/styles", auth.ScopeTilesRead, spendTilesCached, t.Styles},
		{"GET", "/styles/:styleId", auth.ScopeTilesRead, spendTilesCached, t.Style},

		// Key administration. Only operators hold the admin scope, and
		// the scope is checked before anything else runs; the routes are
		// a few indexed statements each and spend no budget, so that a
		// caller's spatial budget never stands between an operator and a
		// revocation.
		{"GET", "/admin/keys", auth.ScopeAdmin, ungated, ad.List},
		{"POST", "/admin/keys", auth.ScopeAdmin, ungated, ad.Create},
		{"GET", "/admin/keys/:id", auth.ScopeAdmin, ungated, ad.Get},
		{"PATCH", "/admin/keys/:id", auth.ScopeAdmin, ungated, ad.Update},
		{"DELETE", "/admin/keys/:id", auth.ScopeAdmin, ungated, ad.Revoke},
		{"POST", "/admin/keys/:id/rotate", auth.ScopeAdmin, ungated, ad.Rotate},
		{"GET", "/admin/keys/:id/usage", auth.ScopeAdmin, ungated, ad.Usage},
		{"GET", "/admin/tiers", auth.ScopeAdmin, ungated, ad.ListTiers},
		{"GET", "/admin/tiers/:tier", auth.ScopeAdmin, ungated, ad.GetTier},
		{"PUT", "/admin/tiers/:tier", auth.ScopeAdmin, ungated, ad.PutTier},
		{"DELETE", "/admin/tiers/:tier", auth.ScopeAdmin, ungated, ad.DeleteTier},
		{"GET", "/admin/audit", auth.ScopeAdmin, ungated, ad.Audit},
		// Webhook deliveries whose retries ran out.
		{"GET", "/admin/dead-letters", auth.ScopeAdmin, ungated, s.dead.List},
		{"POST", "/admin/dead-letters/:id/replay", auth.ScopeAdmin, ungated, s.dead.Replay},
		{"DELETE", "/admin/dead-letters/:id", auth.ScopeAdmin, ungated, s.dead.Drop},
	}
	return rs
}

// newRouter serves rs: each handler behind authentication (unless
// public), its scope check and, unless ungated, the gate's mark of its
// policy. Every GET route answers HEAD too.
func newRouter(cfg config.Config, log *slog.Logger, s *services, rs []route) (*gin.Engine, error) {
	r := httpx.NewRouter(log, httpx.NewMetrics(s.registry), cfg.Server.TrustedProxies)
	r.Use(httpx.CORS(cfg.Server.CORSOrigins, []string{"RateLimit", "RateLimit-Policy", "RateLimit-Limit",
		"RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "X-Request-ID", "X-Cache", "ETag", "Link"}))
	s.quotas.Guarded(guardedBy(rs))
	authn := authenticate(s.authn)
	for _, rt := range rs {
		var chain []gin.HandlerFunc
		switch rt.scope {
		case public, nobody:
		case anyone:
			chain = append(chain, authn)
		default:
			chain = append(chain, authn, requireScope(rt.scope))
		}
		if rt.policy != ungated {
			for _, p := range rt.policy.Policies() {
				if _, ok := s.limiter.Policy(p); !ok {
					return nil, fmt.Errorf("route %s %s: rate-limit policy %q is not configured", rt.method, rt.path, p)
				}
			}
			chain = append(chain, gated(s.gate, rt.method+" "+templatePath(rt.path), rt.policy))
		}
		if s.floors != nil && rt.scope != public && rt.scope != nobody {
			chain = append(chain, readFloor(s.floors))
		}
		if rt.scope != public && rt.scope != nobody {
			chain = append(chain, fairCaller(cfg.FairShare.Settings), meterDB)
		}
		r.Handle(rt.method, rt.path, append(chain, rt.handler)...)
		if rt.method == "GET" {
			// HEAD is GET without the body (RFC 9110): the same chain,
			// so it passes authentication, the scope check and the gate,
			// and spends what the GET would under the GET's name;
			// net/http drops whatever the handler writes as body.
			r.Handle("HEAD", rt.path, append(chain, rt.handler)...)
		}
	}
	return r, nil
}
