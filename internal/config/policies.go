package config

import (
	"github.com/geogate/geogate/internal/ratelimit"
)

// The names of the built-in rate-limit policies: the route table, webhook
// delivery and the tests refer to a policy by these, and Builtin says
// everything else about it.
const (
	PolicyGeofence    = "geofence"
	PolicyTiles       = "tiles"
	PolicyTilesCached = "tiles-cached"
	PolicyFeatures    = "features"
	PolicyPositions   = "positions"
	PolicyDatabase    = "database"
	PolicyEvents      = "events"
	PolicyDeliveries  = "deliveries"
	PolicyRateLimit   = "rate-limit"
)

// BuiltinPolicy is one row of the policy table: a built-in policy's
// name, default windows (in the RATELIMIT_<POLICY> syntax, whose "ms"
// limits count database time), algorithm, and what it is spent on.
type BuiltinPolicy struct {
	Name      string
	Windows   string
	Algorithm ratelimit.Algorithm
	SpentOn   string
}

// Builtin is the policy table: every built-in policy, written once. The
// defaults are built from it, the startup check holds the route table to
// it, and a test holds docs/api/rate-limits.md to it.
var Builtin = []BuiltinPolicy{
	{PolicyGeofence, "10/1s", ratelimit.Log, "/within (by radius) and every /geofences route"},
	{PolicyTiles, "100/1s", ratelimit.Log, "tile renders (cache misses)"},
	// A cached tile is cheap and many make a map: the counter's O(1)
	// memory suits limits this high.
	{PolicyTilesCached, "2000/1s,60000/1m", ratelimit.Counter, "tiles served from a cache, and the OGC tile and style documents"},
	// Milliseconds of PostgreSQL time: one client reading one page after
	// another never uses more than a second each second (its true costs
	// count when each page was admitted), so with room for one more
	// page's estimate GDAL and QGIS copy a layer with their own
	// defaults, while the minute bounds any caller to one connection's
	// worth on average.
	{PolicyFeatures, "2000ms/1s,60000ms/1m", ratelimit.Counter, "every OGC API route, in milliseconds of database time"},
	// A position is a unit: a log would hold one member per position.
	{PolicyPositions, "20000/1s", ratelimit.Counter, "POST /positions, one unit per position"},
	// Every identity's one budget of PostgreSQL time, which every route
	// that runs statements spends beside its own policy: four
	// connections' worth in any second, two on average over a minute. A
	// light client never meets it; a crowd of one identity's requests
	// cannot hold the pool.
	{PolicyDatabase, "4000ms/1s,120000ms/1m", ratelimit.Counter, "every route that runs statements, beside its own policy"},
	{PolicyEvents, "20/1s", ratelimit.Log, "the subscription routes, GET /positions, GET /devices, GET /events, and each read of GET /events/stream"},
	// Per subscriber, the webhook deliveries made for it.
	{PolicyDeliveries, "100/1s", ratelimit.Log, "each webhook delivery, charged to the subscription's owner"},
	{PolicyRateLimit, "60/1m", ratelimit.Log, "GET /rate_limit"},
}

// DefaultPolicies are the application's built-in policies, those the
// routes spend, used when no file is given and as the base a file's
// policies are merged onto.
func DefaultPolicies() map[string]ratelimit.Policy {
	out := make(map[string]ratelimit.Policy, len(Builtin))
	for _, b := range Builtin {
		ws, err := ratelimit.ParseWindows(b.Windows)
		if err != nil {
			panic("config: built-in policy " + b.Name + ": " + err.Error()) // the table above is wrong
		}
		p := ratelimit.NewPolicy(b.Name, ws...)
		p.Algorithm = b.Algorithm
		out[b.Name] = p
	}
	return out
}
