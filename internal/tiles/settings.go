package tiles

import "time"

// Settings configure the tile service. internal/config fills them from the
// environment, starting from DefaultSettings.
type Settings struct {
	// Layers are the tile layers served, in this order.
	Layers []LayerSettings
	// Extent and Buffer are the MVT grid size and the buffer around each
	// tile, in grid units.
	Extent int
	Buffer int
	// Cache turns the Redis tile cache on; CacheTTL is how long a tile
	// lives there.
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
}

// LayerSettings describe one layer: a table with a geometry column in
// EPSG:4326.
type LayerSettings struct {
	Name  string
	Table string
	Geom  string
	ID    string
	// Fields are the feature properties: a column name, or
	// properties.key for a key of the jsonb column properties.
	Fields  []string
	MinZoom int
	MaxZoom int
	// ThinCells > 0 thins points below ThinMaxZoom: each tile is cut into
	// ThinCells x ThinCells cells and keeps one point per cell, the one
	// with the lowest Rank column value.
	ThinCells   int
	ThinMaxZoom int
	Rank        string
	// Simplify is the polygon simplification tolerance in grid units.
	Simplify float64
}

// DefaultSettings are the settings of a deployment that sets none: the
// built-in layers, cached in Redis and in memory.
func DefaultSettings() Settings {
	return Settings{
		Layers:           []LayerSettings{BuiltinLayer("places"), BuiltinLayer("geofences")},
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
	}
}

// BuiltinLayer returns the defaults of the layer called name: those of
// geogate's own tables places and geofences, or for any other name a table
// of that name with the columns geom and id.
func BuiltinLayer(name string) LayerSettings {
	switch name {
	case "places":
		return LayerSettings{
			Name: "places", Table: "places", Geom: "geom", ID: "id",
			Fields:  []string{"name", "properties.country"},
			MinZoom: 0, MaxZoom: 22, ThinCells: 64, ThinMaxZoom: 12, Rank: "id",
		}
	case "geofences":
		// The importer keeps the feature property it takes a fence's name
		// from (--name-property, A3 for the demo countries) in name only,
		// so that is the one field every fence is sure to have.
		return LayerSettings{
			Name: "geofences", Table: "geofences", Geom: "geom", ID: "id",
			Fields:  []string{"name"},
			MinZoom: 0, MaxZoom: 22, Simplify: 4, Rank: "id",
		}
	}
	return LayerSettings{Name: name, Table: name, Geom: "geom", ID: "id", MaxZoom: 22, Rank: "id"}
}
