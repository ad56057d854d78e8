package geofence

// A caller with a spatial scope gets every geometry cut to it, on /within
// and the fence routes as on the OGC items (internal/features) and the
// tiles: the whole geometry where the scope covers it, else its
// ST_Intersection with the scope. Of the cut only the geometry's own
// dimension is kept, as the tiles keep it: a polygon stays polygons, and
// one that meets the scope only along its edge cuts to nothing rather than
// to a line. A multi geometry stays multi, so that a fence remains the
// MultiPolygon it is stored as.

// cutToScope is the SQL of geometry g (in EPSG:4326, a plain column or
// alias: it is repeated) cut to the scope geometry scope.
func cutToScope(g, scope string) string {
	cut := "ST_CollectionExtract(ST_Intersection(" + g + ", " + scope + "), ST_Dimension(" + g + ") + 1)"
	return "CASE WHEN ST_CoveredBy(" + g + ", " + scope + ") THEN " + g +
		" WHEN ST_GeometryType(" + g + ") LIKE 'ST_Multi%' THEN ST_Multi(" + cut + ")" +
		" ELSE " + cut + " END"
}

// scopeWKBSQL is the scope in query parameter param (WKB) as a geometry.
func scopeWKBSQL(param string) string { return "ST_GeomFromWKB(" + param + ", 4326)" }

// scopedFenceSQL is a subquery of one column, g: fence geometry geom cut
// to the scope in parameter param (WKB; NULL for the whole world). A fence
// without area in the scope cuts to an empty geometry, which the readers
// leave out. OFFSET 0 keeps the subquery whole, so that the cut is
// computed once per fence rather than once per use.
func scopedFenceSQL(geom, param string) string {
	return "(SELECT CASE WHEN " + param + "::bytea IS NULL THEN " + geom +
		" ELSE " + cutToScope(geom, scopeWKBSQL(param)) + " END AS g OFFSET 0)"
}
