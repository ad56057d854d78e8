package cql2

import "slices"

// The geometry literals of cql2-json: GeoJSON geometries.

// geoJSON reads a GeoJSON geometry; a GeometryCollection only when
// collection is set, since a collection holds no collection here.
func (jp *jsonParser) geoJSON(o jsonObject, collection bool) (geometry, error) {
	typePath := member(o.path, "type")
	name, _ := o.m["type"].(string)
	i := slices.Index(geoJSONNames[:], name)
	if i < 0 || (!collection && geomKind(i) == gCollection) {
		want := "Point, LineString, Polygon, MultiPoint, MultiLineString or MultiPolygon"
		if collection {
			want = "Point, LineString, Polygon, MultiPoint, MultiLineString, MultiPolygon or GeometryCollection"
		}
		return geometry{}, errAt(loc{path: typePath}, "expected a GeoJSON geometry type (%s), found %s", want, jsonKind(o.m["type"]))
	}
	g := geometry{kind: geomKind(i)}
	var err error
	if g.kind == gCollection {
		err = jp.members(o, &g)
	} else {
		err = jp.coordinates(o, &g)
	}
	if err != nil {
		return geometry{}, err
	}
	if msg := g.check(); msg != "" {
		return geometry{}, errAt(loc{path: o.path}, "%s", msg)
	}
	return g, nil
}

func (jp *jsonParser) members(o jsonObject, g *geometry) error {
	path := member(o.path, "geometries")
	items, ok := o.m["geometries"].([]any)
	if !ok {
		return errAt(loc{path: path}, "a GeometryCollection needs an array of geometries")
	}
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return errAt(loc{path: index(path, i)}, "expected a GeoJSON geometry, found %s", jsonKind(item))
		}
		member, err := jp.geoJSON(jsonObject{m, index(path, i)}, false)
		if err != nil {
			return err
		}
		g.members = append(g.members, member)
	}
	return nil
}

// coordinates reads "coordinates" into g.coords, whose shape (see
// geometry) has one level more than GeoJSON for the single kinds and for
// MultiPoint.
func (jp *jsonParser) coordinates(o jsonObject, g *geometry) error {
	path := member(o.path, "coordinates")
	c, ok := o.m["coordinates"]
	if !ok {
		return errAt(loc{path: o.path}, "a %s needs coordinates", geoJSONNames[g.kind])
	}
	switch g.kind {
	case gPoint:
		p, err := position(c, path)
		g.coords = [][][]pos{{{p}}}
		return err
	case gLineString:
		line, err := positions(c, path)
		g.coords = [][][]pos{{line}}
		return err
	case gMultiPoint:
		pts, err := positions(c, path)
		for _, p := range pts {
			g.coords = append(g.coords, [][]pos{{p}})
		}
		return err
	case gPolygon:
		rings, err := lines(c, path)
		g.coords = [][][]pos{rings}
		return err
	case gMultiLineString:
		ls, err := lines(c, path)
		for _, l := range ls {
			g.coords = append(g.coords, [][]pos{l})
		}
		return err
	}
	return eachArray(c, path, "an array of polygons", func(item any, path string) error {
		rings, err := lines(item, path)
		g.coords = append(g.coords, rings)
		return err
	})
}

// eachArray calls f on each item of the array v, which what describes.
func eachArray(v any, path, what string, f func(item any, path string) error) error {
	items, ok := v.([]any)
	if !ok {
		return errAt(loc{path: path}, "expected %s, found %s", what, jsonKind(v))
	}
	for i, item := range items {
		if err := f(item, index(path, i)); err != nil {
			return err
		}
	}
	return nil
}

func lines(v any, path string) ([][]pos, error) {
	var ls [][]pos
	err := eachArray(v, path, "an array of lines or rings", func(item any, path string) error {
		l, err := positions(item, path)
		ls = append(ls, l)
		return err
	})
	return ls, err
}

func positions(v any, path string) ([]pos, error) {
	var ps []pos
	err := eachArray(v, path, "an array of positions", func(item any, path string) error {
		p, err := position(item, path)
		ps = append(ps, p)
		return err
	})
	return ps, err
}

// position reads [x, y] or [x, y, z]; GeoJSON allows more numbers after
// those, and like the height they are read and dropped.
func position(v any, path string) (pos, error) {
	items, ok := v.([]any)
	if !ok || len(items) < 2 {
		return pos{}, errAt(loc{path: path}, "expected a position, an array of two or three numbers, found %s", jsonKind(v))
	}
	c, err := numbers(items, path)
	if err != nil {
		return pos{}, err
	}
	return pos{c[0], c[1]}, nil
}
