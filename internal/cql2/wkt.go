package cql2

import "strings"

// The geometry literals of cql2-text: WKT, and BBOX(...).

func geomKindOf(name string) (geomKind, bool) {
	for k, n := range geomNames {
		if n == name {
			return geomKind(k), true
		}
	}
	if name == "ENVELOPE" { // the name of BBOX in drafts of CQL2
		return gBBox, true
	}
	return 0, false
}

// geometry reads the literal whose name is t; the next token is "(" or Z.
func (p *textParser) geometry(kind geomKind, t token) (geometry, error) {
	z := false
	if keyword(p.peek(), "Z") {
		if kind == gBBox {
			return geometry{}, p.errf(p.peek(), "a BBOX takes no Z: give it six numbers instead")
		}
		p.next()
		z = true
	}
	g, err := p.geometryBody(kind, z, t)
	if err != nil {
		return geometry{}, err
	}
	if msg := g.check(); msg != "" {
		return geometry{}, p.errf(t, "%s", msg)
	}
	return g, nil
}

func (p *textParser) geometryBody(kind geomKind, z bool, start token) (geometry, error) {
	g := geometry{kind: kind}
	var err error
	switch kind {
	case gBBox:
		return p.bbox(start)
	case gCollection:
		err = p.list(func() error {
			t := p.next()
			k, ok := geomKindOf(keywordText(t))
			if !ok || k == gBBox || k == gCollection {
				return p.errf(t, "expected a POINT, LINESTRING, POLYGON or MULTI geometry in the collection, found %s", describe(t))
			}
			m, err := p.geometry(k, t)
			g.members = append(g.members, m)
			return err
		})
	case gPoint:
		var pt pos
		if pt, err = p.point(z, true); err == nil {
			g.coords = [][][]pos{{{pt}}}
		}
	case gLineString:
		var line []pos
		if line, err = p.line(z); err == nil {
			g.coords = [][][]pos{{line}}
		}
	case gPolygon:
		var rings [][]pos
		if rings, err = p.rings(z); err == nil {
			g.coords = [][][]pos{rings}
		}
	case gMultiPoint:
		// Both MULTIPOINT((1 2), (3 4)) and MULTIPOINT(1 2, 3 4).
		err = p.list(func() error {
			pt, err := p.point(z, p.peek().kind == tLParen)
			g.coords = append(g.coords, [][]pos{{pt}})
			return err
		})
	case gMultiLineString:
		err = p.list(func() error {
			line, err := p.line(z)
			g.coords = append(g.coords, [][]pos{line})
			return err
		})
	case gMultiPolygon:
		err = p.list(func() error {
			rings, err := p.rings(z)
			g.coords = append(g.coords, rings)
			return err
		})
	}
	return g, err
}

func keywordText(t token) string {
	if t.kind != tIdent {
		return ""
	}
	return strings.ToUpper(t.text)
}

// list reads "(" item {"," item} ")".
func (p *textParser) list(item func() error) error {
	if _, err := p.expect(tLParen, "'('"); err != nil {
		return err
	}
	for {
		if err := item(); err != nil {
			return err
		}
		t := p.next()
		if t.kind == tRParen {
			return nil
		}
		if t.kind != tComma {
			return p.errf(t, "expected ',' or ')', found %s", describe(t))
		}
	}
}

func (p *textParser) rings(z bool) ([][]pos, error) {
	var rings [][]pos
	err := p.list(func() error {
		ring, err := p.line(z)
		rings = append(rings, ring)
		return err
	})
	return rings, err
}

func (p *textParser) line(z bool) ([]pos, error) {
	var line []pos
	err := p.list(func() error {
		pt, err := p.point(z, false)
		line = append(line, pt)
		return err
	})
	return line, err
}

// point reads the coordinates of a position, in parentheses when paren
// is set: two, or three with z (or without, which the grammar allows).
func (p *textParser) point(z, paren bool) (pos, error) {
	if paren {
		if _, err := p.expect(tLParen, "'('"); err != nil {
			return pos{}, err
		}
	}
	var c []float64
	first := p.peek()
	for p.peek().kind == tNumber {
		t := p.next()
		n, err := newNumber(t.text, loc{pos: t.pos})
		if err != nil {
			return pos{}, err
		}
		c = append(c, n.f)
	}
	if len(c) < 2 || len(c) > 3 || (z && len(c) != 3) {
		want := "two or three coordinates"
		if z {
			want = "three coordinates (it is Z)"
		}
		return pos{}, p.errf(first, "a position needs %s, found %d", want, len(c))
	}
	if paren {
		if _, err := p.expect(tRParen, "')'"); err != nil {
			return pos{}, err
		}
	}
	return pos{c[0], c[1]}, nil
}

// bbox reads BBOX's four numbers, or six with the heights.
func (p *textParser) bbox(start token) (geometry, error) {
	var c []float64
	err := p.list(func() error {
		t, err := p.expect(tNumber, "a number")
		if err != nil {
			return err
		}
		n, err := newNumber(t.text, loc{pos: t.pos})
		if err != nil {
			return err
		}
		c = append(c, n.f)
		return nil
	})
	if err != nil {
		return geometry{}, err
	}
	return newBBox(c, loc{pos: start.pos})
}

// newBBox makes a box of four numbers, or of six with the heights (which
// every S_ function ignores).
func newBBox(c []float64, at loc) (geometry, error) {
	switch len(c) {
	case 4:
		return geometry{kind: gBBox, box: [4]float64{c[0], c[1], c[2], c[3]}}, nil
	case 6:
		return geometry{kind: gBBox, box: [4]float64{c[0], c[1], c[3], c[4]}}, nil
	}
	return geometry{}, errAt(at, "a BBOX has four numbers, or six with heights; found %d", len(c))
}
