-- geogate's own tables and functions live in geogate's own schema,
-- {{schema}} (GEOGATE_SCHEMA), so that geogate can share a database with an
-- application without mixing its bookkeeping into the application's
-- schemas. When a database migrated before that schema existed is migrated
-- again, internal/pg first moves them there from the schema of their
-- migration history (see pg.relocate). Here the functions are defined again
-- so that their bodies name the schema: a trigger runs with the search_path
-- of whoever writes. For a database migrated since, the definitions are
-- the same as before.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.geofence_parts_build(fence bigint, g geometry) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        INSERT INTO {{schema}}.geofence_parts (fence_id, geom)
        SELECT fence, p FROM ST_Subdivide(g, 256) AS p;
    EXCEPTION WHEN OTHERS THEN
        BEGIN
            INSERT INTO {{schema}}.geofence_parts (fence_id, geom)
            SELECT fence, p FROM ST_Subdivide(ST_MakeValid(g), 256) AS p
            WHERE ST_Dimension(p) = 2;
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO {{schema}}.geofence_parts (fence_id, geom) VALUES (fence, g);
        END;
    END;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.geofence_parts_refresh() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM {{schema}}.geofence_parts WHERE fence_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM {{schema}}.geofence_parts_build(NEW.id, NEW.geom);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.geofence_parts_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE {{schema}}.geofence_parts;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

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

-- +goose Down
-- Forward only: the tables stay in {{schema}}.
SELECT 1;
