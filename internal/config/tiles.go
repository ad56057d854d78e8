package config

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/geogate/geogate/internal/tiles"
)

var (
	tileLayerName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	sqlIdent      = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	jsonKey       = regexp.MustCompile(`^[A-Za-z0-9_]{1,63}$`)
)

// loadTiles reads the tile settings over tiles.DefaultSettings; cache
// calls are bounded by the Redis timeout.
func loadTiles(r *reader, rd Redis) tiles.Settings {
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
	}
	if t.VersionWindow > time.Second {
		// Every write through the API waits the window out.
		r.fail("TILES_VERSION_WINDOW", t.VersionWindow.String(), "at most 1s: every write waits this long before it answers")
	}
	if t.PublicURL != "" {
		r.urlWithScheme("TILES_PUBLIC_URL", t.PublicURL, "http", "https")
	}
	seen := map[string]bool{}
	var names []string
	for _, l := range def.Layers {
		names = append(names, l.Name)
	}
	for _, name := range r.list("TILES_LAYERS", names) {
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

// loadTileLayer reads TILES_<NAME>_* over the defaults of layer name.
func loadTileLayer(r *reader, name string) tiles.LayerSettings {
	def := tiles.BuiltinLayer(name)
	p := "TILES_" + strings.ToUpper(name) + "_"
	l := tiles.LayerSettings{
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
