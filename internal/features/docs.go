package features

import (
	"context"
	"strings"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/ogc"
	"github.com/geogate/geogate/internal/openapi"
)

// Link is an OGC API link.
type Link = ogc.Link

// Media types as OGC API – Features names them.
const (
	typeJSON    = "application/json"
	typeGeoJSON = "application/geo+json"
	typeSchema  = "application/schema+json"
	typeHTML    = "text/html"
	// TypeOpenAPI is the media type of the API description.
	TypeOpenAPI = openapi.ServiceDescType
)

// The conformance classes this package implements.
var conformance = []string{
	"http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core",
	"http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson",
	"http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/oas30",
	"http://www.opengis.net/spec/ogcapi-features-2/1.0/conf/crs",
	"http://www.opengis.net/spec/ogcapi-features-5/1.0/conf/schemas",
	// Part 4: writes to the collections the layer file opens for them.
	"http://www.opengis.net/spec/ogcapi-features-4/1.0/conf/create-replace-delete",
	"http://www.opengis.net/spec/ogcapi-features-4/1.0/conf/update",
}

// conformsTo lists every conformance class /conformance names: this
// package's, the filtering ones and those other packages add.
func (s *Service) conformsTo() []string {
	classes := append(append([]string{}, conformance...), s.filterConformance()...)
	return append(classes, s.s.Conformance...)
}

type landing struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Links       []Link `json:"links"`
}

func (s *Service) landing(base string) landing {
	d := landing{Title: s.s.Title, Description: s.s.Description, Links: []Link{
		{Href: base + "/?f=json", Rel: "self", Type: typeJSON, Title: "This document"},
		{Href: base + "/?f=html", Rel: "alternate", Type: typeHTML, Title: "The map"},
		{Href: base + "/api", Rel: "service-desc", Type: TypeOpenAPI, Title: "The API description"},
		{Href: base + "/docs", Rel: "service-doc", Type: typeHTML, Title: "The API documentation"},
		{Href: base + "/conformance", Rel: "conformance", Type: typeJSON, Title: "Conformance classes"},
		{Href: base + "/collections", Rel: "data", Type: typeJSON, Title: "Collections"},
	}}
	if s.s.LandingLinks != nil {
		d.Links = append(d.Links, s.s.LandingLinks(base)...)
	}
	return d
}

type collection struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Links       []Link   `json:"links"`
	Extent      extent   `json:"extent"`
	ItemType    string   `json:"itemType"`
	CRS         []string `json:"crs"`
	StorageCRS  string   `json:"storageCrs,omitempty"` // none in SRID 0
}

type extent struct {
	Spatial spatialExtent `json:"spatial"`
}

type spatialExtent struct {
	BBox [][4]float64 `json:"bbox"`
	CRS  string       `json:"crs"`
}

// collectionDoc describes layer l to the caller of ctx, its extent cut to
// the caller's scope.
func (s *Service) collectionDoc(ctx context.Context, base string, l *catalog.Layer) collection {
	href := base + "/collections/" + l.ID
	links := []Link{
		{Href: href, Rel: "self", Type: typeJSON, Title: "This collection"},
		{Href: href + "/items", Rel: "items", Type: typeGeoJSON, Title: "Its features"},
		{Href: href + "/queryables", Rel: "http://www.opengis.net/def/rel/ogc/1.0/queryables", Type: typeSchema, Title: "What a filter may name"},
		{Href: href + "/schema", Rel: "http://www.opengis.net/def/rel/ogc/1.0/schema", Type: typeSchema, Title: "Its properties"},
		// The draft's relation, which GDAL before 3.7 follows to learn
		// what it may filter on the server.
		{Href: href + "/queryables", Rel: "queryables", Type: typeJSON, Title: "What a filter may name"},
	}
	if s.s.Tiles {
		links = append(links, Link{Href: href + "/tiles", Rel: "http://www.opengis.net/def/rel/ogc/1.0/tilesets-vector", Type: typeJSON, Title: "Its vector tiles"})
	}
	title := l.Table
	if l.Column != "" && len(l.OtherGeometries) > 0 {
		title += " (" + l.Column + ")"
	}
	return collection{
		ID: l.ID, Title: title, Description: l.Schema + "." + l.Table + "." + l.Column + ", " + l.GeometryType,
		Links: links, ItemType: "feature", CRS: crsURIs(l.SRID), StorageCRS: storageCRS(l.SRID).URI,
		Extent: extent{Spatial: spatialExtent{BBox: [][4]float64{s.bounds(ctx, l)}, CRS: crs84URI}},
	}
}

// bounds is l's extent as the caller of ctx may see it: the planner's
// estimate (the whole world without one) cut to the caller's scope.
func (s *Service) bounds(ctx context.Context, l *catalog.Layer) [4]float64 {
	b := [4]float64{-180, -90, 180, 90}
	if l.Bounds != nil {
		b = [4]float64{l.Bounds.West, l.Bounds.South, l.Bounds.East, l.Bounds.North}
	}
	return auth.ScopeOf(ctx).Clip(b)
}

// collections lists the layers the caller of ctx may read.
func (s *Service) collections(ctx context.Context, base string) []collection {
	out := []collection{}
	for _, l := range s.cat.Layers() {
		if s.check(ctx, l.ID) == nil {
			out = append(out, s.collectionDoc(ctx, base, l))
		}
	}
	return out
}

// jsonSchema is a queryables or schema document.
type jsonSchema struct {
	Schema     string                    `json:"$schema"`
	ID         string                    `json:"$id"`
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	Properties map[string]map[string]any `json:"properties"`
	Additional bool                      `json:"additionalProperties"`
	// Legacy lists the queryables as the draft of Part 3 did, which
	// GDAL before 3.7 reads; empty in a schema document.
	Legacy []legacyQueryable `json:"queryables,omitempty"`
}

type legacyQueryable struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// geometryFormat is the JSON Schema format OGC API gives a geometry type.
func geometryFormat(t string) string {
	switch t {
	case "Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon", "GeometryCollection":
		return "geometry-" + strings.ToLower(t)
	}
	return "geometry-any"
}

// queryablesDoc lists what filters and sortby may name.
func (s *Service) queryablesDoc(base string, l *layerSQL) jsonSchema {
	d := s.schemaHead(base+"/collections/"+l.l.ID+"/queryables", l)
	for _, q := range l.queryables {
		d.Properties[q.Name] = typed(q.Name, q.Type, q.Format)
		d.Legacy = append(d.Legacy, legacyQueryable{ID: q.Name, Type: q.Type})
	}
	return d
}

// schemaDoc lists every property a feature carries.
func (s *Service) schemaDoc(base string, l *layerSQL) jsonSchema {
	d := s.schemaHead(base+"/collections/"+l.l.ID+"/schema", l)
	if l.own {
		for _, q := range l.queryables {
			d.Properties[q.Name] = typed(q.Name, q.Type, q.Format)
		}
		d.Additional = true // the stored properties are free-form
	} else {
		for _, p := range l.l.Properties {
			d.Properties[p.Name] = typed(p.Name, p.Type, p.Format)
		}
	}
	if !l.l.Key.FromRow() {
		d.Properties[l.l.Key.Column]["x-ogc-role"] = "id"
	}
	return d
}

func (s *Service) schemaHead(id string, l *layerSQL) jsonSchema {
	geom := map[string]any{"format": geometryFormat(l.l.GeometryType), "x-ogc-role": "primary-geometry"}
	return jsonSchema{
		Schema: "https://json-schema.org/draft/2020-12/schema", ID: id, Type: "object", Title: l.l.ID,
		Properties: map[string]map[string]any{"geometry": geom},
	}
}

// typed is the JSON Schema of a property of JSON type typ; a json or jsonb
// column ("json") holds any JSON value, so its schema names no type.
func typed(name, typ, format string) map[string]any {
	m := map[string]any{"title": name}
	if typ != "json" {
		m["type"] = typ
	}
	if format != "" {
		m["format"] = format
	}
	return m
}
