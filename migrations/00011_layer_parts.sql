-- Point-in-polygon checks on any published polygon table. A table's
-- polygons may be subdivided into a copy in geogate's schema (api publish
-- --contains), as geofence_parts does for the fences: the index then finds
-- the one or two small parts under a point instead of a whole country.
-- Statement-level triggers with transition tables keep the copy right for
-- every writer, in the writing transaction. A copy table has two columns,
-- key (of the table's key type) and geom (in the table's SRID); the
-- triggers name it, the key column and the geometry column as arguments.

-- +goose Up
-- layer_parts_of cuts the polygonal part of g (the polygons of a generic
-- column's rows, nothing of its points and lines) into pieces of at most
-- 256 vertices, in two dimensions. GEOS cannot cut every invalid polygon:
-- those are cut in their ST_MakeValid form and, if that fails too, kept
-- whole (slower to test, never missing). The pieces are gathered before
-- any is returned, so that a failed cut leaves no half of its pieces.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.layer_parts_of(g geometry) RETURNS SETOF geometry
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    a geometry := ST_Force2D(ST_CollectionExtract(g, 3));
    parts geometry[];
BEGIN
    IF ST_IsEmpty(a) THEN
        RETURN;
    END IF;
    BEGIN
        parts := ARRAY(SELECT ST_Subdivide(a, 256));
    EXCEPTION WHEN OTHERS THEN
        BEGIN
            parts := ARRAY(SELECT p FROM ST_Subdivide(ST_CollectionExtract(ST_MakeValid(a), 3), 256) AS p WHERE ST_Dimension(p) = 2);
        EXCEPTION WHEN OTHERS THEN
            parts := ARRAY[a];
        END;
    END;
    RETURN QUERY SELECT unnest(parts);
END
$$;
-- +goose StatementEnd

-- layer_parts_sync keeps a copy in step with one statement on its table:
-- the parts of rows deleted, or whose key or geometry changed, go; those
-- of rows inserted, or whose key or geometry changed, come. An UPDATE that
-- leaves both alone (a property) cuts nothing. The application's writes
-- never fail because of it: a copy that is gone (dropped by hand) is
-- skipped, and one that can no longer follow its table (its key or
-- geometry column renamed or retyped) is dropped, with a warning; geogate
-- then answers from the table itself until api publish --contains builds
-- it again. The function runs with the rights of geogate's role, so that
-- application roles need no privilege on geogate's schema; its search_path
-- (set below) holds only the system catalog and PostGIS.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.layer_parts_sync() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    parts text := '{{schema}}.' || quote_ident(TG_ARGV[0]);
    k text := quote_ident(TG_ARGV[1]);
    g text := quote_ident(TG_ARGV[2]);
    -- a row of the other transition table with the same key and geometry
    same text := '(n.%2$s = o.%2$s AND n.%3$s::bytea IS NOT DISTINCT FROM o.%3$s::bytea)';
BEGIN
    IF to_regclass(parts) IS NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        IF TG_OP = 'TRUNCATE' THEN
            EXECUTE 'TRUNCATE ' || parts;
        END IF;
        IF TG_OP = 'DELETE' THEN
            EXECUTE format('DELETE FROM %1$s p USING geogate_old o WHERE p.key = o.%2$s', parts, k);
        ELSIF TG_OP = 'UPDATE' THEN
            EXECUTE format('DELETE FROM %1$s p WHERE p.key IN (SELECT o.%2$s FROM geogate_old o
                WHERE NOT EXISTS (SELECT FROM geogate_new n WHERE ' || same || '))', parts, k, g);
        END IF;
        IF TG_OP = 'INSERT' THEN
            EXECUTE format('INSERT INTO %1$s (key, geom) SELECT n.%2$s, x FROM geogate_new n, {{schema}}.layer_parts_of(n.%3$s) AS x', parts, k, g);
        ELSIF TG_OP = 'UPDATE' THEN
            EXECUTE format('INSERT INTO %1$s (key, geom) SELECT n.%2$s, x FROM geogate_new n, {{schema}}.layer_parts_of(n.%3$s) AS x
                WHERE NOT EXISTS (SELECT FROM geogate_old o WHERE ' || same || ')', parts, k, g);
        END IF;
    EXCEPTION WHEN undefined_column OR undefined_function OR datatype_mismatch OR cannot_coerce THEN
        EXECUTE 'DROP TABLE ' || parts;
        RAISE WARNING 'geogate: % no longer follows %.% (%); it was dropped, and api publish --contains builds it again',
            parts, TG_TABLE_SCHEMA, TG_TABLE_NAME, SQLERRM;
    END;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The trigger runs for the application's sessions, whatever their
-- search_path: pin it to the system catalog and the schema PostGIS lives
-- in (a cast to bytea and the PostGIS functions are found there).
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION {{schema}}.layer_parts_sync() SET search_path = pg_catalog, %I, pg_temp',
        (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'postgis'));
END
$$;
-- +goose StatementEnd

-- same_place says b, a point in lng/lat, is (lng, lat) within 1e-4
-- degrees (about 10 m): a round trip through a projection brings a point
-- back far closer, even well outside the projection's area of use; a
-- fold of it, hundreds of kilometres off. Longitudes 360 apart are one
-- place, and every longitude is the same at a pole.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.same_place(lng float8, lat float8, b geometry) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT abs(ST_Y(b) - lat) <= 1e-4
       AND (abs(lat) >= 90 - 1e-4 OR abs(ST_X(b) - lng) <= 1e-4 OR abs(abs(ST_X(b) - lng) - 360) <= 1e-4)
$$;
-- +goose StatementEnd

-- layer_points are the points (lng[i], lat[i]) in SRID srid, numbered from
-- 1; a point the projection cannot take, or takes somewhere it does not
-- bring back from (beyond its area of use a projection may give finite
-- nonsense, which could land inside a polygon), is left out: no polygon of
-- the layer holds it.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.layer_points(lng float8[], lat float8[], srid integer)
RETURNS TABLE (i integer, g geometry)
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE AS $$
BEGIN
    IF srid = 4326 THEN
        RETURN QUERY SELECT u.n::integer, ST_SetSRID(ST_MakePoint(u.x, u.y), 4326)
            FROM unnest(lng, lat) WITH ORDINALITY AS u(x, y, n);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.projected_points(lng, lat, 1, least(cardinality(lng), cardinality(lat)), srid);
END
$$;
-- +goose StatementEnd

-- projected_points is layer_points for the points lo to hi. One call of
-- ST_Transform on them all costs about what two calls on single points do,
-- so they are projected together; when that fails (a point the projection
-- cannot take: a pole in Web Mercator), each half is tried on its own, so
-- that a few such points cost a few halvings each.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.projected_points(lng float8[], lat float8[], lo integer, hi integer, srid integer)
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

-- +goose Down
DROP FUNCTION {{schema}}.projected_points(float8[], float8[], integer, integer, integer);
DROP FUNCTION {{schema}}.layer_points(float8[], float8[], integer);
DROP FUNCTION {{schema}}.same_place(float8, float8, geometry);
DROP FUNCTION {{schema}}.layer_parts_sync();
DROP FUNCTION {{schema}}.layer_parts_of(geometry);
