-- Functions /within uses to reach any layer through the spatial index it
-- has, in its own SRID: a box in that SRID sure to hold every point within
-- a radius of a longitude and latitude on the WGS84 spheroid.

-- +goose Up
-- circle_box is the longitude/latitude box of the circle of r metres
-- around (lng, lat), taken on a sphere smaller than the Earth (the
-- spheroid's smallest radius of curvature, shaved), so never smaller than
-- the geodesic circle: internal/spatial makes the same box for spatial
-- scopes, and TestCircleConservativeOnSpheroid checks it. Over a pole it
-- spans every longitude; across the antimeridian it is two boxes.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.circle_box(lng float8, lat float8, r float8) RETURNS geometry
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    d    float8 := r / 6335000.0 * 1.001 + 1e-9;
    dd   float8 := degrees(d);
    s    float8 := lat - dd;
    n    float8 := lat + dd;
    ratio float8;
    dl   float8;
BEGIN
    IF s <= -90 OR n >= 90 OR d >= pi() / 2 THEN
        RETURN ST_MakeEnvelope(-180, greatest(s, -90), 180, least(n, 90), 4326);
    END IF;
    ratio := sin(d) / cos(radians(lat));
    IF ratio >= 1 THEN
        RETURN ST_MakeEnvelope(-180, s, 180, n, 4326);
    END IF;
    dl := degrees(asin(ratio));
    IF dl >= 180 THEN
        RETURN ST_MakeEnvelope(-180, s, 180, n, 4326);
    ELSIF lng - dl < -180 THEN
        RETURN ST_Collect(ST_MakeEnvelope(lng - dl + 360, s, 180, n, 4326), ST_MakeEnvelope(-180, s, lng + dl, n, 4326));
    ELSIF lng + dl > 180 THEN
        RETURN ST_Collect(ST_MakeEnvelope(lng - dl, s, 180, n, 4326), ST_MakeEnvelope(-180, s, lng + dl - 360, n, 4326));
    END IF;
    RETURN ST_MakeEnvelope(lng - dl, s, lng + dl, n, 4326);
END
$$;
-- +goose StatementEnd

-- search_box is circle_box in SRID srid, as a box: its outline, cut into
-- 64 pieces a side so that a projection's curves cannot stray far from it,
-- projected, its extent widened by 2%. A projection that cannot take the
-- box (a pole in Web Mercator) gives a box holding everything: the query
-- then scans, still exact.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.search_box(lng float8, lat float8, r float8, srid integer) RETURNS geometry
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

-- safe_transform is ST_Transform, or NULL where the projection cannot
-- take the point. (Both catch errors, which no process of a parallel query
-- may: PARALLEL UNSAFE keeps /within out of parallel plans, which its
-- index searches do not need.)
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.safe_transform(g geometry, srid integer) RETURNS geometry
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
BEGIN
    RETURN ST_Transform(g, srid);
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION {{schema}}.safe_transform(geometry, integer);
DROP FUNCTION {{schema}}.search_box(float8, float8, float8, integer);
DROP FUNCTION {{schema}}.circle_box(float8, float8, float8);
