package catalog

import (
	"context"
	"net/http"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/gin-gonic/gin"
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

// Gate is what the layer list asks of the service's gate (gate.Gate):
// to admit the request, and which layers its caller may read.
type Gate interface {
	Admit(ctx context.Context, a gate.Ask) (gate.Pass, error)
	Readable(ctx context.Context, layer string) bool
}

// Handler serves GET /layers from the catalog.
type Handler struct {
	cat  *Catalog
	gate Gate
}

// NewHandler returns the layer list of c, each request admitted by g
// (nil: gate.Open()).
func NewHandler(c *Catalog, g Gate) *Handler {
	if g == nil {
		g = gate.Open()
	}
	return &Handler{cat: c, gate: g}
}

// List serves GET /layers: every layer the caller may read. A caller with
// a spatial scope (auth.ScopeOf) sees bounds cut to it and no row
// estimates, which describe the whole layer.
func (h *Handler) List(g *gin.Context) {
	p, err := h.gate.Admit(g.Request.Context(), gate.Ask{})
	if !httpx.Admitted(g, p, err) {
		return
	}
	defer p.Done()
	h.cat.list(h.gate.Readable)(g)
}

// list serves the layers that readable says the request's caller may
// read (nil: every layer).
func (c *Catalog) list(readable func(ctx context.Context, id string) bool) gin.HandlerFunc {
	return func(g *gin.Context) {
		ctx := g.Request.Context()
		sc := auth.ScopeOf(ctx)
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
