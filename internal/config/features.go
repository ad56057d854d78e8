package config

import (
	"strconv"

	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/pg"
)

// loadFeatures reads the settings of the OGC API – Features routes; their
// queries are bounded by the database timeouts and their links start with
// the public URL the tiles use.
func loadFeatures(r *reader, db DB, publicURL string) features.Settings {
	f := features.Settings{
		Timeouts:      pg.Timeouts{QueryTimeout: db.QueryTimeout, AcquireTimeout: db.AcquireTimeout},
		Own:           db.Schema,
		DefaultLimit:  r.integer("FEATURES_DEFAULT_LIMIT", features.DefaultLimit, 1, 100_000),
		MaxLimit:      r.integer("FEATURES_MAX_LIMIT", features.MaxLimit, 1, 100_000),
		MaxPageBytes:  r.integer("FEATURES_MAX_PAGE_BYTES", features.DefaultMaxPageBytes, 64<<10, 1<<40),
		CountMax:      r.integer("FEATURES_COUNT_MAX", features.DefaultCountMax, -1, 1<<31-1),
		PrefetchBytes: r.integer("FEATURES_PREFETCH_MB", features.DefaultPrefetchBytes>>20, 0, 1<<20) << 20,
		PrefetchKeep:  r.duration("FEATURES_PREFETCH_KEEP", features.DefaultPrefetchKeep),
		CursorKey:     r.str("FEATURES_CURSOR_KEY", r.str("GEOFENCE_CURSOR_KEY", "")),
		PublicURL:     publicURL,
		Title:         r.str("FEATURES_TITLE", "geogate"),
		Description:   r.str("FEATURES_DESCRIPTION", "Rate-limited spatial data: OGC API – Features and Tiles, proximity queries, geofences."),
		Tiles:         true,
	}
	if f.DefaultLimit > f.MaxLimit {
		r.fail("FEATURES_DEFAULT_LIMIT", strconv.Itoa(f.DefaultLimit), "must not exceed FEATURES_MAX_LIMIT")
	}
	if f.CursorKey != "" && len(f.CursorKey) < 16 {
		r.fail("FEATURES_CURSOR_KEY", "(hidden)", "must be at least 16 characters")
	}
	return f
}
