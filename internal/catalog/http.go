package catalog

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/spatial"
)

// LayerInfo is one entry of GET /layers.
type LayerInfo struct {
	ID             string         `json:"id"`
	Schema         string         `json:"schema"`
	Table          string         `json:"table"`
	Kind           string         `json:"kind"`
	GeometryColumn string         `json:"geometry_column"`
	GeometryType   string         `json:"geometry_type"`
	SRID           int            `json:"srid"`
	Geography      bool           `json:"geography"`
	Bounds         *[4]float64    `json:"bounds"`
	EstimatedRows  *int64         `json:"estimated_rows"`
	IDColumn       *IDColumn      `json:"id_column"`
	Properties     []PropertyInfo `json:"properties"`
	SpatialIndex   bool           `json:"spatial_index"`
	// Invalidation is "exact" when a change to the relation retires its
	// cached tiles at once, "ttl" when they live out TILES_CACHE_TTL.
	Invalidation string `json:"invalidation"`
	// Contains says how /geofences/contains tests the layer's polygons (see
	// Layer.ContainsPath); nil for a layer without polygons.
	Contains *string `json:"contains"`
}

// IDColumn names a layer's feature ids.
type IDColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// PropertyInfo is one property of a layer.
type PropertyInfo struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Format string `json:"format,omitempty"`
	PGType string `json:"pg_type"`
}

// Info describes l as GET /layers does.
func Info(l *Layer) LayerInfo {
	li := LayerInfo{
		ID: l.ID, Schema: l.Schema, Table: l.Table, Kind: l.Kind, GeometryColumn: l.Column,
		GeometryType: l.GeometryType, SRID: l.SRID, Geography: l.Geography, SpatialIndex: l.Indexed,
		Properties: make([]PropertyInfo, len(l.Properties)), Invalidation: "ttl",
	}
	if l.Bounds != nil {
		li.Bounds = &[4]float64{l.Bounds.West, l.Bounds.South, l.Bounds.East, l.Bounds.North}
	}
	if l.Rows >= 0 {
		rows := l.Rows
		li.EstimatedRows = &rows
	}
	if !l.Key.FromRow() {
		li.IDColumn = &IDColumn{Name: l.Key.Column, Type: l.Key.Type}
	}
	for i, p := range l.Properties {
		li.Properties[i] = PropertyInfo{Name: p.Name, Type: p.Type, Format: p.Format, PGType: p.PGType}
	}
	if l.Invalidated {
		li.Invalidation = "exact"
	}
	if path := l.ContainsPath(); path != "" {
		li.Contains = &path
	}
	return li
}

// List serves GET /layers: every layer that readable says the request's
// caller may read (nil: every layer). A caller with a spatial scope (scope
// may be nil) sees bounds cut to it and no row estimates, which describe
// the whole layer.
func (c *Catalog) List(readable func(ctx context.Context, id string) bool, scope func(context.Context) *spatial.Scope) gin.HandlerFunc {
	return func(g *gin.Context) {
		ctx := g.Request.Context()
		var sc *spatial.Scope
		if scope != nil {
			sc = scope(ctx)
		}
		out := []LayerInfo{}
		for _, l := range c.Layers() {
			if readable != nil && !readable(ctx, l.ID) {
				continue
			}
			li := Info(l)
			if sc != nil {
				li.EstimatedRows = nil
				b := [4]float64{-180, -90, 180, 90}
				if li.Bounds != nil {
					b = *li.Bounds
				}
				b = sc.Clip(b)
				li.Bounds = &b
			}
			out = append(out, li)
		}
		g.JSON(http.StatusOK, gin.H{"layers": out})
	}
}
