package cql2

import "fmt"

// spatial writes an S_ function. A geometry column is written bare and the
// literal is projected into the column's SRID: PostGIS then adds an index
// condition (column && literal) for every function but S_DISJOINT. Each
// literal is a scalar subquery, so that it is read, made valid and
// projected once per execution, also under a generic plan, where an
// expression of parameters would otherwise be evaluated again for each
// row.
//
// On a geography column, S_INTERSECTS is the geography ST_Intersects,
// which measures on the spheroid and uses the column's index, and
// S_DISJOINT its negation. PostGIS has no geography form of the other
// functions: they compare the column cast to geometry (planar, in
// longitude and latitude), which no index of the geography serves.
func (w *sqlWriter) spatial(e *spatial) (string, error) {
	ops := []operand{e.a, e.b}
	vs, err := w.resolveAll(ops...)
	if err != nil {
		return "", err
	}
	for i, v := range vs {
		if v.typ != vGeometry {
			return "", errAt(ops[i].where(), "%s compares geometries, not %s", e.fn, describeValue(ops[i], v))
		}
	}
	geography := (vs[0].col != nil && vs[0].col.Geography) || (vs[1].col != nil && vs[1].col.Geography)
	if geography && (e.fn == "S_INTERSECTS" || e.fn == "S_DISJOINT") {
		a, err := w.asGeography(vs[0])
		if err != nil {
			return "", err
		}
		b, err := w.asGeography(vs[1])
		if err != nil {
			return "", err
		}
		s := "ST_Intersects(" + a + ", " + b + ")"
		if e.fn == "S_DISJOINT" {
			return "(NOT " + s + ")", nil
		}
		return s, nil
	}
	srid := w.crs.srid()
	switch {
	case geography:
		srid = 4326
	case vs[0].col != nil:
		srid = vs[0].col.SRID
	case vs[1].col != nil:
		srid = vs[1].col.SRID
	}
	a, err := w.asGeometry(vs[0], srid)
	if err != nil {
		return "", err
	}
	b, err := w.asGeometry(vs[1], srid)
	if err != nil {
		return "", err
	}
	return spatialFunctions[e.fn] + "(" + a + ", " + b + ")", nil
}

func (w *sqlWriter) asGeography(v value) (string, error) {
	switch {
	case v.col == nil:
		return w.literal(v.lit.(*geomLit), 4326, true)
	case v.col.Geography:
		return v.col.SQL, nil
	case v.col.SRID == 4326:
		return v.col.SQL + "::geography", nil
	}
	return fmt.Sprintf("ST_Transform(%s, 4326)::geography", v.col.SQL), nil
}

func (w *sqlWriter) asGeometry(v value, srid int) (string, error) {
	switch {
	case v.col == nil:
		return w.literal(v.lit.(*geomLit), srid, false)
	case v.col.Geography:
		return v.col.SQL + "::geometry", nil
	case v.col.SRID == srid:
		return v.col.SQL, nil
	}
	return fmt.Sprintf("ST_Transform(%s, %d)", v.col.SQL, srid), nil
}

// literal binds a geometry literal as WKT and returns it in srid (4326
// for geography), as geography when geography is set. Areas are made valid first: GEOS
// refuses to relate some invalid polygons, and collections whose members
// overlap, failing the statement. A collection is merged into one
// geometry, which covers the same points, so the S_ functions give the
// same answers.
func (w *sqlWriter) literal(l *geomLit, srid int, geography bool) (string, error) {
	from := w.crs.srid()
	wkt, msg := l.g.sqlWKT(from, w.crs.LatLon, geography)
	if msg != "" {
		return "", errAt(l.at, "%s", msg)
	}
	s := fmt.Sprintf("ST_GeomFromText(%s, %d)", w.bind(wkt, "text"), from)
	switch {
	case l.g.kind == gCollection:
		s = "ST_UnaryUnion(ST_MakeValid(" + s + "))"
	case l.g.polygonal():
		s = "ST_MakeValid(" + s + ")"
	}
	if srid != from {
		s = fmt.Sprintf("ST_Transform(%s, %d)", s, srid)
	}
	if geography && l.g.kind == gBBox {
		// A box's edges are parallels and meridians; as geography each
		// edge would be the great circle between its corners, which
		// strays far from a parallel (and the long way round goes the
		// short way). Cut into half degrees, its edges keep within metres
		// of the parallels.
		s = "ST_Segmentize(" + s + ", 0.5)"
	}
	if geography {
		s += "::geography"
	}
	return "(SELECT " + s + ")", nil
}
