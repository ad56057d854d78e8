-- Tiles for any published layer. A table's data version is now kept under
-- its schema-qualified name ("public.places"), since layers come from
-- several schemas; the trigger function says so, and the rows of the
-- built-in tables are renamed. tile_box is the box a tile covers in a
-- layer's own SRID, so that tiles use the spatial index the layer has.

-- +goose Up
UPDATE {{schema}}.tile_versions v SET tbl = n.nspname || '.' || c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE position('.' IN v.tbl) = 0 AND c.oid = to_regclass('{{data}}.' || quote_ident(v.tbl));

-- The function runs with its owner's rights (geogate's role), so that an
-- application writing to a published table needs no privilege on geogate's
-- schema: api publish --invalidate must never make its writes fail.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.geogate_tiles_bump() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    name text := TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME;
    v bigint;
BEGIN
    INSERT INTO {{schema}}.tile_versions AS t (tbl, version) VALUES (name, 1)
    ON CONFLICT (tbl) DO UPDATE SET version = t.version + 1
    RETURNING t.version INTO v;
    PERFORM pg_notify('geogate_tiles', name || ':' || v);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- tile_box is the longitude/latitude box (w, s, e, n) in SRID srid, as a
-- box sure to hold it: the outline cut into 64 pieces a side, projected,
-- its extent widened by 2%. The box is checked by projecting it back: far
-- outside a projection's area of use some give finite nonsense rather than
-- an error, and then, as when the projection fails, the answer is a box
-- holding everything (the tile query scans, still right).
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.tile_box(w float8, s float8, e float8, n float8, srid integer) RETURNS geometry
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    b geometry := ST_MakeEnvelope(w, s, e, n, 4326);
    x box2d;
    m float8;
    out geometry;
BEGIN
    BEGIN
        x := ST_Transform(ST_Segmentize(b, greatest(e - w, n - s) / 64), srid)::box2d;
        m := 0.02 * greatest(ST_XMax(x) - ST_XMin(x), ST_YMax(x) - ST_YMin(x)) + 1e-6;
        IF x IS NOT NULL AND m < 'Infinity'::float8 THEN
            out := ST_SetSRID(ST_Expand(x::geometry, m), srid);
            IF ST_Covers(ST_Transform(ST_Segmentize(out, 2 * m), 4326), b) THEN
                RETURN out;
            END IF;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    RETURN ST_MakeEnvelope('-Infinity', '-Infinity', 'Infinity', 'Infinity', srid);
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION {{schema}}.tile_box(float8, float8, float8, float8, integer);
ALTER FUNCTION {{schema}}.geogate_tiles_bump() SECURITY INVOKER RESET search_path;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.geogate_tiles_bump() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
BEGIN
    INSERT INTO {{schema}}.tile_versions AS t (tbl, version) VALUES (TG_TABLE_NAME, 1)
    ON CONFLICT (tbl) DO UPDATE SET version = t.version + 1
    RETURNING t.version INTO v;
    PERFORM pg_notify('geogate_tiles', TG_TABLE_NAME || ':' || v);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
UPDATE {{schema}}.tile_versions SET tbl = split_part(tbl, '.', 2) WHERE position('.' IN tbl) > 0;
