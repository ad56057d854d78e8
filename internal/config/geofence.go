package config

import (
	"regexp"
	"strconv"
)

// Geofence holds the settings of internal/geofence: /within and the
// geofence routes.
type Geofence struct {
	// Layers are the tables /within may search, by name. Each needs the
	// columns id, name, properties and geom (SRID 4326).
	Layers []string
	// MaxRadius is the largest /within radius in metres.
	MaxRadius int
	// DefaultLimit and MaxLimit bound the page size of /within and of the
	// geofence listing.
	DefaultLimit int
	MaxLimit     int
	// MaxVertices bounds the vertices of one geofence.
	MaxVertices int
	// MaxBodyBytes bounds a geofence or batch request body.
	MaxBodyBytes int
	// MaxBatchPoints bounds the points of one POST /geofences/contains.
	MaxBatchPoints int
	// CursorKey signs paging cursors. Empty means a random key per start:
	// cursors then stop working across restarts and between replicas.
	CursorKey string
}

var layerName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func loadGeofence(r *reader) Geofence {
	g := Geofence{
		Layers:         r.list("GEOFENCE_LAYERS", []string{"places", "geofences"}),
		MaxRadius:      r.integer("GEOFENCE_MAX_RADIUS_M", 100_000, 1, 20_000_000),
		DefaultLimit:   r.integer("GEOFENCE_DEFAULT_LIMIT", 100, 1, 10_000),
		MaxLimit:       r.integer("GEOFENCE_MAX_LIMIT", 1000, 1, 10_000),
		MaxVertices:    r.integer("GEOFENCE_MAX_VERTICES", 100_000, 4, 10_000_000),
		MaxBodyBytes:   r.integer("GEOFENCE_MAX_BODY_BYTES", 5<<20, 1<<10, 1<<30),
		MaxBatchPoints: r.integer("GEOFENCE_MAX_BATCH_POINTS", 1000, 1, 100_000),
		CursorKey:      r.str("GEOFENCE_CURSOR_KEY", ""),
	}
	for _, l := range g.Layers {
		if !layerName.MatchString(l) {
			r.fail("GEOFENCE_LAYERS", l, "each layer must be a lower-case table name")
		}
	}
	if g.DefaultLimit > g.MaxLimit {
		r.fail("GEOFENCE_DEFAULT_LIMIT", strconv.Itoa(g.DefaultLimit), "must not exceed GEOFENCE_MAX_LIMIT")
	}
	if g.CursorKey != "" && len(g.CursorKey) < 16 {
		r.fail("GEOFENCE_CURSOR_KEY", "(hidden)", "must be at least 16 characters")
	}
	return g
}
