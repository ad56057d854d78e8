package config

import (
	"strings"
	"time"

	"github.com/geogate/geogate/internal/tiles"
)

// loadTiles reads the tile settings over tiles.DefaultSettings; cache
// calls are bounded by the Redis timeout.
func loadTiles(r *reader, rd Redis, db DB, layers map[string]tiles.LayerSettings) tiles.Settings {
	def := tiles.DefaultSettings()
	t := tiles.Settings{
		Extent:           r.integer("TILES_EXTENT", def.Extent, 256, 16384),
		Buffer:           r.integer("TILES_BUFFER", def.Buffer, 0, 1024),
		Cache:            r.boolean("TILES_CACHE", def.Cache),
		CacheTTL:         r.duration("TILES_CACHE_TTL", def.CacheTTL),
		MemoryCacheBytes: int64(r.integer("TILES_MEMORY_CACHE_MB", int(def.MemoryCacheBytes>>20), 0, 1<<20)) << 20,
		VersionWindow:    r.durationOrZero("TILES_VERSION_WINDOW", def.VersionWindow),
		CacheControl:     r.str("TILES_CACHE_CONTROL", def.CacheControl),
		RenderTimeout:    r.duration("TILES_RENDER_TIMEOUT", def.RenderTimeout),
		RedisTimeout:     rd.Timeout,
		PublicURL:        strings.TrimRight(r.str("TILES_PUBLIC_URL", ""), "/"),
		KeyPrefix:        def.KeyPrefix,
		Own:              db.Schema,
		Layers:           layers,
	}
	loadLegacyTiles(r, t.Layers)
	if t.VersionWindow > time.Second {
		// Every write through the API waits the window out.
		r.fail("TILES_VERSION_WINDOW", t.VersionWindow.String(), "at most 1s: every write waits this long before it answers")
	}
	if t.PublicURL != "" {
		r.urlWithScheme("TILES_PUBLIC_URL", t.PublicURL, "http", "https")
	}
	return t
}
