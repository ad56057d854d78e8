package config

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Tiles holds the settings of internal/tiles.
type Tiles struct {
	// Layers are the tile layers served, in TILES_LAYERS order.
	Layers []TileLayer
	// Extent and Buffer are the MVT grid size and the buffer around each
	// tile, in grid units.
	Extent int
	Buffer int
	// Cache turns the Redis tile cache on; TTL is how long a tile lives.
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
	// CacheControl is the Cache-Control header of tile responses.
	CacheControl string
	// RenderTimeout bounds one tile query.
	RenderTimeout time.Duration
	// DBMaxConns bounds the connection pool tiles are rendered on, apart
	// from the one every other query uses.
	DBMaxConns int
	// PublicURL, when set, is the base of URLs in TileJSON documents
	// (https://maps.example.com); otherwise they come from the request.
	PublicURL string
}

// TileLayer is one layer: a table with a geometry column in EPSG:4326.
type TileLayer struct {
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

var (
	tileLayerName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	sqlIdent      = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	jsonKey       = regexp.MustCompile(`^[A-Za-z0-9_]{1,63}$`)
)

var builtinTileLayers = map[string]TileLayer{
	"places": {
		Name: "places", Table: "places", Geom: "geom", ID: "id",
		Fields:  []string{"name", "properties.country"},
		MinZoom: 0, MaxZoom: 22, ThinCells: 64, ThinMaxZoom: 12, Rank: "id",
	},
	// The importer keeps the feature property it takes a fence's name from
	// (--name-property, A3 for the demo countries) in name only, so that
	// is the one field every fence is sure to have.
	"geofences": {
		Name: "geofences", Table: "geofences", Geom: "geom", ID: "id",
		Fields:  []string{"name"},
		MinZoom: 0, MaxZoom: 22, Simplify: 4, Rank: "id",
	},
}

func loadTiles(r *reader) Tiles {
	t := Tiles{
		Extent:           r.integer("TILES_EXTENT", 4096, 256, 16384),
		Buffer:           r.integer("TILES_BUFFER", 64, 0, 1024),
		Cache:            r.boolean("TILES_CACHE", true),
		CacheTTL:         r.duration("TILES_CACHE_TTL", 24*time.Hour),
		MemoryCacheBytes: int64(r.integer("TILES_MEMORY_CACHE_MB", 64, 0, 1<<20)) << 20,
		VersionWindow:    r.durationOrZero("TILES_VERSION_WINDOW", 5*time.Millisecond),
		CacheControl:     r.str("TILES_CACHE_CONTROL", "public, max-age=60"),
		RenderTimeout:    r.duration("TILES_RENDER_TIMEOUT", 10*time.Second),
		DBMaxConns:       r.integer("TILES_DB_MAX_CONNS", 10, 1, 1000),
		PublicURL:        strings.TrimRight(r.str("TILES_PUBLIC_URL", ""), "/"),
	}
	if t.VersionWindow > time.Second {
		// Every write through the API waits the window out.
		r.fail("TILES_VERSION_WINDOW", t.VersionWindow.String(), "at most 1s: every write waits this long before it answers")
	}
	if t.PublicURL != "" {
		r.urlWithScheme("TILES_PUBLIC_URL", t.PublicURL, "http", "https")
	}
	seen := map[string]bool{}
	for _, name := range r.list("TILES_LAYERS", []string{"places", "geofences"}) {
		if !tileLayerName.MatchString(name) {
			r.fail("TILES_LAYERS", name, "layer names are lower-case letters, digits and _")
			continue
		}
		if seen[name] {
			r.fail("TILES_LAYERS", name, "layer listed twice")
			continue
		}
		seen[name] = true
		t.Layers = append(t.Layers, loadTileLayer(r, name))
	}
	return t
}

// loadTileLayer reads TILES_<NAME>_* over the built-in defaults of name.
func loadTileLayer(r *reader, name string) TileLayer {
	def, ok := builtinTileLayers[name]
	if !ok {
		def = TileLayer{Name: name, Table: name, Geom: "geom", ID: "id", MaxZoom: 22, Rank: "id"}
	}
	p := "TILES_" + strings.ToUpper(name) + "_"
	l := TileLayer{
		Name:        name,
		Table:       r.str(p+"TABLE", def.Table),
		Geom:        r.str(p+"GEOM", def.Geom),
		ID:          r.str(p+"ID", def.ID),
		Fields:      r.list(p+"FIELDS", def.Fields),
		MinZoom:     r.integer(p+"MINZOOM", def.MinZoom, 0, 30),
		MaxZoom:     r.integer(p+"MAXZOOM", def.MaxZoom, 0, 30),
		ThinCells:   r.integer(p+"THIN_CELLS", def.ThinCells, 0, 1024),
		ThinMaxZoom: r.integer(p+"THIN_MAXZOOM", def.ThinMaxZoom, 0, 30),
		Rank:        r.str(p+"RANK", def.Rank),
		Simplify:    def.Simplify,
	}
	if v := r.str(p+"SIMPLIFY", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1024 {
			r.fail(p+"SIMPLIFY", v, "must be a number of grid units between 0 and 1024")
		} else {
			l.Simplify = f
		}
	}
	if l.MinZoom > l.MaxZoom {
		r.fail(p+"MINZOOM", strconv.Itoa(l.MinZoom), "must not exceed "+p+"MAXZOOM")
	}
	for _, kv := range [][2]string{{p + "TABLE", l.Table}, {p + "GEOM", l.Geom}, {p + "ID", l.ID}, {p + "RANK", l.Rank}} {
		if !sqlIdent.MatchString(kv[1]) {
			r.fail(kv[0], kv[1], "must be a lower-case SQL identifier")
		}
	}
	for _, f := range l.Fields {
		if key, ok := strings.CutPrefix(f, "properties."); ok {
			if !jsonKey.MatchString(key) {
				r.fail(p+"FIELDS", f, "a properties key is letters, digits and _")
			}
		} else if !sqlIdent.MatchString(f) {
			r.fail(p+"FIELDS", f, "must be a column name or properties.<key>")
		}
	}
	return l
}
