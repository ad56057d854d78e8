package config

import (
	"regexp"
	"strconv"

	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/openapi"
)

var layerName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// loadGeofence reads the settings of /within and the geofence routes;
// their queries are bounded by the database timeouts.
func loadGeofence(r *reader, db DB) geofence.Settings {
	g := geofence.Settings{
		Timeouts: geofence.Timeouts{QueryTimeout: db.QueryTimeout, AcquireTimeout: db.AcquireTimeout},
		Rules: geofence.Rules{
			Limits: openapi.Limits{
				MaxRadius:      float64(r.integer("GEOFENCE_MAX_RADIUS_M", 100_000, 1, 20_000_000)),
				DefaultLimit:   r.integer("GEOFENCE_DEFAULT_LIMIT", 100, 1, 10_000),
				MaxLimit:       r.integer("GEOFENCE_MAX_LIMIT", 1000, 1, 10_000),
				MaxBatchPoints: r.integer("GEOFENCE_MAX_BATCH_POINTS", 1000, 1, 100_000),
			},
			MaxVertices:  r.integer("GEOFENCE_MAX_VERTICES", 100_000, 4, 10_000_000),
			MaxBodyBytes: r.integer("GEOFENCE_MAX_BODY_BYTES", 5<<20, 1<<10, 1<<30),
			MaxPageBytes: r.integer("GEOFENCE_MAX_PAGE_BYTES", 8<<20, 64<<10, 1<<30),
		},
		Own:       db.Schema,
		CursorKey: r.str("GEOFENCE_CURSOR_KEY", ""),
	}
	if v := r.str("GEOFENCE_LAYERS", ""); v != "" {
		r.fail("GEOFENCE_LAYERS", v, "is gone: /within searches every published layer; "+
			"narrow them with PUBLISH_INCLUDE and PUBLISH_EXCLUDE (docs/api/layers.md)")
	}
	if g.DefaultLimit > g.MaxLimit {
		r.fail("GEOFENCE_DEFAULT_LIMIT", strconv.Itoa(g.DefaultLimit), "must not exceed GEOFENCE_MAX_LIMIT")
	}
	if g.CursorKey != "" && len(g.CursorKey) < 16 {
		r.fail("GEOFENCE_CURSOR_KEY", "(hidden)", "must be at least 16 characters")
	}
	return g
}
