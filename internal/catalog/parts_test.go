package catalog

import "testing"

// TestContainsPath: which layers containment tests, and how.
func TestContainsPath(t *testing.T) {
	parts := &Parts{Table: "parts_x", Key: "key"}
	tests := []struct {
		name, postgisType string
		indexed           bool
		parts             *Parts
		want              string
	}{
		{"Polygon", "POLYGON", true, nil, "index"},
		{"MultiPolygonSubdivided", "MULTIPOLYGON", true, parts, "subdivided"},
		{"Measured", "POLYGONM", true, nil, "index"},
		{"Generic", "GEOMETRY", false, nil, "scan"},
		{"Collection", "GEOMETRYCOLLECTION", true, nil, "index"},
		{"Points", "POINT", true, nil, ""},
		{"Lines", "MULTILINESTRINGM", true, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Layer{GeometryType: normalType(tt.postgisType), Indexed: tt.indexed, Parts: tt.parts}
			if got := l.ContainsPath(); got != tt.want {
				t.Errorf("ContainsPath() of a %s layer = %q, want %q", l.GeometryType, got, tt.want)
			}
		})
	}
}
