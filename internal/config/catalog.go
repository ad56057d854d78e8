package config

import (
	"path"
	"slices"
	"time"

	"github.com/geogate/geogate/internal/catalog"
)

// loadCatalog reads what is published: the schemas searched for layers
// and the patterns that narrow them. geogate's own schema is never one.
func loadCatalog(r *reader, db DB, layers map[string]catalog.LayerSettings) catalog.Settings {
	s := catalog.Settings{
		Schemas: r.list("PUBLISH_SCHEMAS", []string{"public"}),
		Include: r.list("PUBLISH_INCLUDE", nil),
		Exclude: r.list("PUBLISH_EXCLUDE", nil),
		Own:     db.Schema,
		Refresh: r.durationOrZero("PUBLISH_REFRESH", 2*time.Second),
		Layers:  layers,
	}
	if slices.Contains(s.Schemas, db.Schema) {
		r.fail("PUBLISH_SCHEMAS", db.Schema, "geogate's own schema (GEOGATE_SCHEMA) is never published")
	}
	for _, name := range []string{"PUBLISH_INCLUDE", "PUBLISH_EXCLUDE"} {
		for _, p := range r.list(name, nil) {
			if _, err := path.Match(p, ""); err != nil {
				r.fail(name, p, "not a pattern: "+err.Error())
			}
		}
	}
	return s
}
