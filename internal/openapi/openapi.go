// Package openapi holds geogate's API description: an OpenAPI 3.1 document
// written by hand in openapi.yaml and served as JSON, and the interactive
// documentation pages (Swagger UI on /docs, ReDoc on /redoc) built from
// vendored, embedded assets so that they work offline.
//
// The document is a contract: the tests in package contract validate every
// request and response of the integration suite against it, and check that
// the router serves exactly the documented routes.
package openapi

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"math"

	"github.com/goccy/go-yaml"
)

//go:embed openapi.yaml
var source []byte

//go:embed assets
var assets embed.FS

// YAML returns the document as written, with the default limits.
func YAML() []byte { return source }

// Limits are the configurable bounds the document states; a zero field
// keeps the value written in openapi.yaml (the default configuration).
type Limits struct {
	MaxRadius      float64 // GEOFENCE_MAX_RADIUS_M
	DefaultLimit   int     // GEOFENCE_DEFAULT_LIMIT
	MaxLimit       int     // GEOFENCE_MAX_LIMIT
	MaxBatchPoints int     // GEOFENCE_MAX_BATCH_POINTS
	// FeaturesDefaultLimit and FeaturesMaxLimit bound an OGC API items
	// page (FEATURES_DEFAULT_LIMIT, FEATURES_MAX_LIMIT).
	FeaturesDefaultLimit, FeaturesMaxLimit int
	// EventsMaxBatch bounds a batch of positions (EVENTS_MAX_BATCH) and
	// EventsMaxPage a page of events (EVENTS_MAX_PAGE).
	EventsMaxBatch, EventsMaxPage int
}

// patches returns where each limit goes in the document.
func (l Limits) patches() []patch {
	var ps []patch
	add := func(v any, set bool, path ...string) {
		if set {
			ps = append(ps, patch{path: path, value: v})
		}
	}
	var radius any = l.MaxRadius
	if l.MaxRadius == math.Trunc(l.MaxRadius) && l.MaxRadius < 1<<53 {
		radius = int64(l.MaxRadius) // 100000, not 100000.0
	}
	add(radius, l.MaxRadius > 0, "components", "parameters", "Radius", "schema", "maximum")
	add(l.DefaultLimit, l.DefaultLimit > 0, "components", "parameters", "PageLimit", "schema", "default")
	add(l.MaxLimit, l.MaxLimit > 0, "components", "parameters", "PageLimit", "schema", "maximum")
	add(l.FeaturesDefaultLimit, l.FeaturesDefaultLimit > 0, "components", "parameters", "limit", "schema", "default")
	add(l.FeaturesMaxLimit, l.FeaturesMaxLimit > 0, "components", "parameters", "limit", "schema", "maximum")
	add(l.MaxBatchPoints, l.MaxBatchPoints > 0, "components", "schemas", "ContainsBatch", "properties", "points", "maxItems")
	add(l.EventsMaxBatch, l.EventsMaxBatch > 0, "components", "schemas", "PositionBatch", "maxItems")
	add(l.EventsMaxPage, l.EventsMaxPage > 0, "components", "parameters", "EventsLimit", "schema", "maximum")
	return ps
}

type patch struct {
	path  []string
	value any
}

// JSON returns the document as served on /openapi.json: compact JSON, keys
// in the order they are written, with l's limits in place of the defaults.
// It errs when the embedded YAML does not parse or lacks a place a limit
// goes.
func JSON(l Limits) ([]byte, error) {
	var doc any
	if err := yaml.UnmarshalWithOptions(source, &doc, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	for _, p := range l.patches() {
		if err := set(doc, p.path, p.value); err != nil {
			return nil, err
		}
	}
	b, err := yaml.MarshalWithOptions(doc, yaml.JSON())
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return out.Bytes(), nil
}

// set replaces the value at path in a document decoded with ordered maps.
func set(doc any, path []string, value any) error {
	cur := doc
	for i, key := range path {
		m, ok := cur.(yaml.MapSlice)
		if !ok {
			return fmt.Errorf("openapi.yaml: %v is not an object", path[:i])
		}
		found := false
		for j := range m {
			if k, _ := m[j].Key.(string); k == key {
				if i == len(path)-1 {
					m[j].Value = value
					return nil
				}
				cur, found = m[j].Value, true
				break
			}
		}
		if !found {
			return fmt.Errorf("openapi.yaml: %v is missing", path[:i+1])
		}
	}
	return nil
}
