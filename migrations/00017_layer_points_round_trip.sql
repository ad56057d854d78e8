-- projected_points finds, for each point, where in the layer's SRID it
-- lies as the layer's geometries brought to longitude and latitude see
-- it, also for projections whose two directions are not each other's
-- inverse.
--
-- Point-in-polygon on a layer in another SRID projects the point there
-- (so that the layer's index serves) and kept it only when projecting it
-- back found the point again within 1e-4 degrees. SRID 900913 (Web
-- Mercator on a sphere, reached through geocentric coordinates with the
-- height dropped) brings a point back up to about 140 m from where it
-- started, 43 m at latitude 52.5: such points were dropped, and a layer
-- in 900913 answered that nothing holds them. Had they been kept, points
-- near an edge would still disagree with the geometry brought to 4326,
-- which /within and the items use (see 00014).
--
-- Now the projected point is corrected until projecting it back gives the
-- point asked for: x := x + (p - back(x)), which converges in a few steps
-- because the round trip's error changes slowly. The layer's geometry
-- then holds the projected point exactly when ST_Transform(geometry, 4326)
-- holds the point, up to how an edge runs between its vertices in each
-- CRS. Where the two directions agree (nearly every SRID) the first step
-- already does and nothing changes. A point the projection cannot take,
-- or does not bring back near where it started after the steps (beyond
-- the projection's area of use), is left out as before.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.projected_points(lng float8[], lat float8[], lo integer, hi integer, srid integer)
RETURNS TABLE (i integer, g geometry)
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    x geometry;    -- the points, moved so that their round trip lands on lng, lat
    dst geometry;
    back geometry;
    off float8;
BEGIN
    IF lo > hi THEN
        RETURN;
    END IF;
    x := (SELECT ST_SetSRID(ST_Collect(ST_MakePoint(lng[n], lat[n]) ORDER BY n), 4326) FROM generate_series(lo, hi) AS n);
    BEGIN
        FOR step IN 1..4 LOOP
            dst := ST_Transform(x, srid);
            back := ST_Transform(dst, 4326);
            SELECT max(greatest(abs(lng[lo + b.path[1] - 1] - ST_X(b.geom)), abs(lat[lo + b.path[1] - 1] - ST_Y(b.geom))))
              INTO off FROM ST_Dump(back) b;
            EXIT WHEN off <= 1e-9 OR step = 4;
            x := (SELECT ST_SetSRID(ST_Collect(ST_MakePoint(
                           ST_X(a.geom) + lng[lo + a.path[1] - 1] - ST_X(b.geom),
                           ST_Y(a.geom) + lat[lo + a.path[1] - 1] - ST_Y(b.geom)) ORDER BY a.path[1]), 4326)
                  FROM ST_Dump(x) a JOIN ST_Dump(back) b USING (path));
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        IF lo < hi THEN
            RETURN QUERY SELECT * FROM {{schema}}.projected_points(lng, lat, lo, (lo + hi) / 2, srid)
                UNION ALL SELECT * FROM {{schema}}.projected_points(lng, lat, (lo + hi) / 2 + 1, hi, srid);
        END IF;
        RETURN;
    END;
    RETURN QUERY SELECT (lo + z.n - 1)::integer, z.dg
        FROM ROWS FROM (ST_Dump(dst), ST_Dump(back)) WITH ORDINALITY AS z(dp, dg, bp, bg, n)
        WHERE {{schema}}.same_place(lng[lo + z.n - 1], lat[lo + z.n - 1], z.bg);
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.projected_points(lng float8[], lat float8[], lo integer, hi integer, srid integer)
RETURNS TABLE (i integer, g geometry)
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    dst geometry;
    back geometry;
BEGIN
    IF lo > hi THEN
        RETURN;
    END IF;
    BEGIN
        dst := ST_Transform((SELECT ST_SetSRID(ST_Collect(ST_MakePoint(lng[n], lat[n]) ORDER BY n), 4326)
                             FROM generate_series(lo, hi) AS n), srid);
        back := ST_Transform(dst, 4326);
    EXCEPTION WHEN OTHERS THEN
        IF lo < hi THEN
            RETURN QUERY SELECT * FROM {{schema}}.projected_points(lng, lat, lo, (lo + hi) / 2, srid)
                UNION ALL SELECT * FROM {{schema}}.projected_points(lng, lat, (lo + hi) / 2 + 1, hi, srid);
        END IF;
        RETURN;
    END;
    RETURN QUERY SELECT (lo + z.n - 1)::integer, z.dg
        FROM ROWS FROM (ST_Dump(dst), ST_Dump(back)) WITH ORDINALITY AS z(dp, dg, bp, bg, n)
        WHERE {{schema}}.same_place(lng[lo + z.n - 1], lat[lo + z.n - 1], z.bg);
END
$$;
-- +goose StatementEnd
