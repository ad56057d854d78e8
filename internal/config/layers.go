package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/tiles"
)

// layerFile is the YAML document at LAYERS_CONFIG: settings per layer id,
// each optional, over what discovery finds.
type layerFile struct {
	Layers map[string]fileLayer `yaml:"layers"`
}

type fileLayer struct {
	// Exclude unpublishes the layer.
	Exclude bool `yaml:"exclude"`
	// Properties are the columns shown, everywhere; nil shows them all.
	Properties []string   `yaml:"properties"`
	Scopes     []string   `yaml:"scopes"`
	Limit      *fileLimit `yaml:"limit"`
	Tiles      *fileTiles `yaml:"tiles"`
	// AsCaller runs the layer's statements as the caller's database role
	// (access.Rule.AsCaller); CacheBy is what its cached answers are kept
	// per.
	AsCaller bool   `yaml:"as_caller"`
	CacheBy  string `yaml:"cache_by"`
	// Write opens the layer for writing through OGC API Features Part 4.
	Write bool `yaml:"write"`
}

type fileLimit struct {
	Policy string `yaml:"policy"`
	Cost   *int   `yaml:"cost"`
}

type fileTiles struct {
	Fields   []string  `yaml:"fields"`
	MinZoom  *int      `yaml:"minzoom"`
	MaxZoom  *int      `yaml:"maxzoom"`
	Thin     *fileThin `yaml:"thin"`
	Simplify *float64  `yaml:"simplify"`
}

type fileThin struct {
	Cells     *int   `yaml:"cells"`
	BelowZoom *int   `yaml:"below_zoom"`
	Rank      string `yaml:"rank"`
}

// layerIDPattern is what a layer id may be (catalog.LayerID makes them).
var layerIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// scopeName is what a scope a layer asks for may be.
var scopeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// layerSettings are the per-layer settings for each package that has
// some.
type layerSettings struct {
	catalog map[string]catalog.LayerSettings
	tiles   map[string]tiles.LayerSettings
	access  map[string]access.Rule
}

// loadLayers reads the layer file named by LAYERS_CONFIG (none: no
// settings); policies are the rate-limit policies a layer may name.
func loadLayers(r *reader, policies []string) layerSettings {
	out := layerSettings{catalog: map[string]catalog.LayerSettings{}, tiles: map[string]tiles.LayerSettings{}, access: map[string]access.Rule{}}
	file := r.str("LAYERS_CONFIG", "")
	if file == "" {
		return out
	}
	data, err := os.ReadFile(file)
	if err != nil {
		r.fail("LAYERS_CONFIG", file, "cannot read the layer file: "+err.Error())
		return out
	}
	var f layerFile
	if err := yaml.UnmarshalWithOptions(data, &f, yaml.Strict()); err != nil {
		r.errs = append(r.errs, "layer file "+file+": "+strings.ReplaceAll(yaml.FormatError(err, false, true), "\n", " "))
		return out
	}
	ids := make([]string, 0, len(f.Layers))
	for id := range f.Layers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := out.add(id, f.Layers[id], policies); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("layer file %s: layer %s: %v", file, id, err))
		}
	}
	return out
}

// add checks one layer's settings and files them.
func (s layerSettings) add(id string, fl fileLayer, policies []string) error {
	var errs []error
	if !layerIDPattern.MatchString(id) {
		errs = append(errs, errors.New("a layer id is letters, digits, _ and - (GET /layers lists them)"))
	}
	s.catalog[id] = catalog.LayerSettings{Exclude: fl.Exclude, Properties: fl.Properties, AsCaller: fl.AsCaller, Write: fl.Write}
	rule := access.Rule{Scopes: fl.Scopes}
	for _, sc := range fl.Scopes {
		if !scopeName.MatchString(sc) {
			errs = append(errs, fmt.Errorf("scope %q: letters, digits, _, ., : and -", sc))
		}
	}
	if fl.Limit != nil {
		rule.Policy = fl.Limit.Policy
		if rule.Policy != "" && !slices.Contains(policies, rule.Policy) {
			errs = append(errs, fmt.Errorf("limit policy %q is not a configured rate-limit policy (%s)", rule.Policy, strings.Join(policies, ", ")))
		}
		if fl.Limit.Cost != nil {
			rule.Cost = *fl.Limit.Cost
			if rule.Cost < 1 || rule.Cost > 1000 {
				errs = append(errs, fmt.Errorf("limit cost %d: want 1 to 1000", rule.Cost))
			}
		}
	}
	rule.AsCaller, rule.CacheBy = fl.AsCaller, fl.CacheBy
	if err := checkCacheBy(fl); err != nil {
		errs = append(errs, err)
	}
	s.access[id] = rule
	if fl.Tiles != nil {
		t, err := fl.Tiles.settings()
		errs = append(errs, err)
		s.tiles[id] = t
	}
	return errors.Join(errs...)
}

// claimName is what cache_by may name a claim as.
var claimName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$`)

// checkCacheBy refuses a cache_by that means nothing: one on a layer that
// does not run as its caller (its answers are everyone's), or one that is
// neither role nor claim:<name>.
func checkCacheBy(fl fileLayer) error {
	c := fl.CacheBy
	switch {
	case c == "":
		return nil
	case !fl.AsCaller:
		return errors.New("cache_by applies to a layer with as_caller: true")
	case c == access.CacheByRole:
		return nil
	case strings.HasPrefix(c, access.CacheByClaim) && claimName.MatchString(strings.TrimPrefix(c, access.CacheByClaim)):
		return nil
	}
	return fmt.Errorf("cache_by %q: want role or claim:<name> (omit it to cache nothing of the layer)", c)
}

func (ft fileTiles) settings() (tiles.LayerSettings, error) {
	t := tiles.LayerSettings{Fields: ft.Fields, MinZoom: ft.MinZoom, MaxZoom: ft.MaxZoom, Simplify: ft.Simplify}
	var errs []error
	for _, z := range []*int{ft.MinZoom, ft.MaxZoom} {
		if z != nil && (*z < 0 || *z > tiles.MaxZoom) {
			errs = append(errs, fmt.Errorf("tiles: zoom %d: want 0 to %d", *z, tiles.MaxZoom))
		}
	}
	if ft.MinZoom != nil && ft.MaxZoom != nil && *ft.MinZoom > *ft.MaxZoom {
		errs = append(errs, errors.New("tiles: minzoom is above maxzoom"))
	}
	if ft.Simplify != nil && (*ft.Simplify < 0 || *ft.Simplify > 1024) {
		errs = append(errs, errors.New("tiles: simplify is grid units from 0 to 1024"))
	}
	if th := ft.Thin; th != nil {
		t.ThinCells, t.ThinMaxZoom, t.Rank = th.Cells, th.BelowZoom, th.Rank
		if th.Cells != nil && (*th.Cells < 0 || *th.Cells > 1024) {
			errs = append(errs, errors.New("tiles: thin cells from 0 (off) to 1024"))
		}
		if th.BelowZoom != nil && (*th.BelowZoom < 0 || *th.BelowZoom > tiles.MaxZoom+1) {
			errs = append(errs, fmt.Errorf("tiles: thin below_zoom from 0 to %d", tiles.MaxZoom+1))
		}
	}
	return t, errors.Join(errs...)
}

// legacyTileLayers are the layers whose TILES_<LAYER>_* variables still
// apply, over the layer file: those of the built-in tables.
var legacyTileLayers = []string{"places", "geofences"}

// loadLegacyTiles applies TILES_<LAYER>_* for the built-in layers and
// refuses the variables that no longer mean anything: tile layers are the
// published tables now, each under its own name.
func loadLegacyTiles(r *reader, s map[string]tiles.LayerSettings) {
	if v := r.str("TILES_LAYERS", ""); v != "" {
		r.fail("TILES_LAYERS", v, "gone: every published layer has tiles (GET /tiles); narrow them with PUBLISH_INCLUDE, PUBLISH_EXCLUDE or exclude in the layer file (LAYERS_CONFIG, see docs/configuration.md#layer-file)")
	}
	for _, name := range legacyTileLayers {
		p := "TILES_" + strings.ToUpper(name) + "_"
		for _, gone := range []string{"TABLE", "GEOM", "ID"} {
			if v := r.str(p+gone, ""); v != "" {
				r.fail(p+gone, v, "gone: a layer is a published table under its own id; set its tiles in the layer file (LAYERS_CONFIG, see docs/configuration.md#layer-file)")
			}
		}
		l := s[name]
		if v := r.list(p+"FIELDS", nil); v != nil {
			l.Fields = v
		}
		l.MinZoom = r.optInt(p+"MINZOOM", l.MinZoom, 0, tiles.MaxZoom)
		l.MaxZoom = r.optInt(p+"MAXZOOM", l.MaxZoom, 0, tiles.MaxZoom)
		l.ThinCells = r.optInt(p+"THIN_CELLS", l.ThinCells, 0, 1024)
		l.ThinMaxZoom = r.optInt(p+"THIN_MAXZOOM", l.ThinMaxZoom, 0, tiles.MaxZoom+1)
		l.Rank = r.str(p+"RANK", l.Rank)
		if v := r.str(p+"SIMPLIFY", ""); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1024 {
				r.fail(p+"SIMPLIFY", v, "must be a number of grid units between 0 and 1024")
			} else {
				l.Simplify = &f
			}
		}
		if l.MinZoom != nil && l.MaxZoom != nil && *l.MinZoom > *l.MaxZoom {
			r.fail(p+"MINZOOM", strconv.Itoa(*l.MinZoom), "must not exceed the layer's maxzoom")
		}
		if !zeroTiles(l) {
			s[name] = l
		}
	}
}

func zeroTiles(l tiles.LayerSettings) bool {
	return l.Fields == nil && l.MinZoom == nil && l.MaxZoom == nil && l.ThinCells == nil &&
		l.ThinMaxZoom == nil && l.Rank == "" && l.Simplify == nil
}
