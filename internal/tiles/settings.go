package tiles

import "time"

// Settings configure the tile service. internal/config fills them from the
// environment and the layer file, starting from DefaultSettings.
type Settings struct {
	// Layers change, per layer id, what discovery and the defaults give a
	// layer's tiles.
	Layers map[string]LayerSettings
	// Extent and Buffer are the MVT grid size and the buffer around each
	// tile, in grid units.
	Extent int
	Buffer int
	// Cache turns the Redis tile cache on; CacheTTL is how long a tile
	// lives there, and the longest a tile of a layer without exact
	// invalidation is served after its data changed.
	Cache    bool
	CacheTTL time.Duration
	// MemoryCacheBytes of hot tiles are also kept in each process, in
	// front of Redis; 0 keeps none.
	MemoryCacheBytes int64
	// VersionWindow is how long one read of a layer's shared version in
	// Redis lets a replica serve that layer's tiles from memory without
	// reading it again; every write through the API waits this long
	// before it answers. 0 reads the version for every tile.
	VersionWindow time.Duration
	// CacheControl is the Cache-Control header of tile responses ("" for
	// none).
	CacheControl string
	// RenderTimeout bounds one tile query.
	RenderTimeout time.Duration
	// RedisTimeout bounds each cache call: a slow Redis must not hold
	// tiles up.
	RedisTimeout time.Duration
	// PublicURL, when set, is the base of URLs in TileJSON documents
	// (https://maps.example.com); otherwise they come from the request.
	PublicURL string
	// KeyPrefix starts every Redis key of the cache; the database's id
	// follows it, so databases sharing one Redis never meet.
	KeyPrefix string
	// Own is geogate's own schema, which holds tile_versions and the
	// functions tile queries call.
	Own string
}

// LayerSettings change one layer's tiles. A nil field keeps the default
// (see defaultsFor).
type LayerSettings struct {
	// Fields are the feature properties, in order: a column name, or
	// column.key for a key of a jsonb column (read as a string). Nil is
	// every column but the geometries.
	Fields  []string
	MinZoom *int
	MaxZoom *int
	// ThinCells > 0 thins points below ThinMaxZoom: each tile is cut into
	// ThinCells x ThinCells cells and keeps one point per cell, the one
	// with the lowest Rank column value (by default the feature id).
	ThinCells   *int
	ThinMaxZoom *int
	Rank        string
	// Simplify is the simplification tolerance of lines and polygons, in
	// grid units.
	Simplify *float64
}

// DefaultSettings are the settings of a deployment that sets none: every
// published layer, cached in Redis and in memory.
func DefaultSettings() Settings {
	return Settings{
		Extent:           4096,
		Buffer:           64,
		Cache:            true,
		CacheTTL:         24 * time.Hour,
		MemoryCacheBytes: 64 << 20,
		VersionWindow:    5 * time.Millisecond,
		CacheControl:     "public, max-age=60",
		RenderTimeout:    10 * time.Second,
		RedisTimeout:     250 * time.Millisecond,
		KeyPrefix:        "geogate:tiles:",
		Own:              "geogate",
	}
}

// resolved are a layer's tile settings with every default filled in.
type resolved struct {
	Fields      []string // nil: every property
	MinZoom     int
	MaxZoom     int
	ThinCells   int
	ThinMaxZoom int
	Rank        string // "": the feature id
	Simplify    float64
}

// defaultsFor are the settings of a layer of kind that no setting
// changes. Points are thinned at every zoom to one per 64th of a tile a
// side (four pixels of a 256-pixel tile), which bounds a tile to about
// 4,400 features whatever the layer holds; lines and polygons are
// simplified by two grid units. geogate's own tables keep the layers they
// always had: places thinned below zoom 12, fences simplified by four,
// with the properties the map page shows.
func defaultsFor(k Kind, own string) resolved {
	r := resolved{MaxZoom: 22}
	switch k {
	case Points:
		r.ThinCells, r.ThinMaxZoom = 64, 31
	case Lines, Polygons, Mixed:
		r.Simplify = 2
	}
	switch own {
	case "places":
		r.Fields, r.ThinMaxZoom = []string{"name", "properties.country"}, 12
	case "geofences":
		r.Fields, r.Simplify = []string{"name"}, 4
	}
	return r
}

// apply returns r changed by s.
func (r resolved) apply(s LayerSettings) resolved {
	if s.Fields != nil {
		r.Fields = s.Fields
	}
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&r.MinZoom, s.MinZoom)
	set(&r.MaxZoom, s.MaxZoom)
	set(&r.ThinCells, s.ThinCells)
	set(&r.ThinMaxZoom, s.ThinMaxZoom)
	if s.Rank != "" {
		r.Rank = s.Rank
	}
	if s.Simplify != nil {
		r.Simplify = *s.Simplify
	}
	return r
}
