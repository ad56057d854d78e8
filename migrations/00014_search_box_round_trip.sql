-- search_box allows for projections whose two directions are not each
-- other's inverse.
--
-- /within measures a geometry column through ST_Transform(column, 4326)
-- but finds its candidates with a box projected the other way, from
-- longitude and latitude into the layer's SRID. For most SRIDs the two
-- directions agree to far below a millimetre. Where the layer's CRS has
-- another datum, reached through geocentric coordinates with the height
-- dropped, they do not: SRID 900913 (Web Mercator on a sphere, with a null
-- TOWGS84) brings a point back up to 141 m from where it started, the
-- error growing with latitude. A feature exactly at the query point then
-- fell outside the narrow box of the second step (whose radius is the
-- distance of the nearest matches, there 0), and /within missed it.
--
-- The box is now widened, beyond its 2%, by twice the largest distance
-- the round trip (layer SRID to 4326 and back) moves the projected centre,
-- corners and side midpoints of the box: the error changes slowly across
-- a box, so twice its largest sample covers every point of it. Where the
-- two directions agree it adds nothing.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.search_box(lng float8, lat float8, r float8, srid integer) RETURNS geometry
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    b geometry := {{schema}}.circle_box(lng, lat, r);
    e box2d;
    s geometry;
    back float8;
    m float8;
BEGIN
    IF srid = 4326 THEN
        RETURN b;
    END IF;
    BEGIN
        e := ST_Extent(ST_Transform(ST_Segmentize(g, greatest(ST_XMax(g) - ST_XMin(g), ST_YMax(g) - ST_YMin(g)) / 64), srid))
             FROM ST_Dump(b) AS p(path, g);
        -- The centre, corners and side midpoints, projected, and how far
        -- projecting them back and forth again moves them.
        s := ST_Transform(ST_Collect(ST_SetSRID(ST_MakePoint(lng, lat), 4326),
                                     ST_Points(ST_Segmentize(b, greatest(ST_XMax(b) - ST_XMin(b), ST_YMax(b) - ST_YMin(b)) / 2))), srid);
        SELECT max(ST_Distance(a.geom, t.geom)) INTO back
        FROM ST_DumpPoints(s) a JOIN ST_DumpPoints(ST_Transform(ST_Transform(s, 4326), srid)) t USING (path);
        m := 0.02 * greatest(ST_XMax(e) - ST_XMin(e), ST_YMax(e) - ST_YMin(e)) + 2 * back + 1e-6;
        IF e IS NOT NULL AND m < 'Infinity'::float8 THEN
            RETURN ST_SetSRID(ST_Expand(e::geometry, m), srid);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    RETURN ST_MakeEnvelope('-Infinity', '-Infinity', 'Infinity', 'Infinity', srid);
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.search_box(lng float8, lat float8, r float8, srid integer) RETURNS geometry
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    b geometry := {{schema}}.circle_box(lng, lat, r);
    e box2d;
    m float8;
BEGIN
    IF srid = 4326 THEN
        RETURN b;
    END IF;
    BEGIN
        e := ST_Extent(ST_Transform(ST_Segmentize(g, greatest(ST_XMax(g) - ST_XMin(g), ST_YMax(g) - ST_YMin(g)) / 64), srid))
             FROM ST_Dump(b) AS p(path, g);
        m := 0.02 * greatest(ST_XMax(e) - ST_XMin(e), ST_YMax(e) - ST_YMin(e)) + 1e-6;
        IF e IS NOT NULL AND m < 'Infinity'::float8 THEN
            RETURN ST_SetSRID(ST_Expand(e::geometry, m), srid);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    RETURN ST_MakeEnvelope('-Infinity', '-Infinity', 'Infinity', 'Infinity', srid);
END
$$;
-- +goose StatementEnd
