-- Tile cache invalidation: each table that feeds a tile layer has a data
-- version. A statement-level trigger bumps it in the same transaction as
-- the write (so a tile query that reads the version and the rows in one
-- statement sees both from one snapshot) and sends
-- NOTIFY geogate_tiles '<table>:<version>', delivered at commit.

-- +goose Up
CREATE TABLE {{schema}}.tile_versions (
    tbl      text   PRIMARY KEY,
    version  bigint NOT NULL DEFAULT 1
);

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.geogate_tiles_bump() RETURNS trigger
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

INSERT INTO {{schema}}.tile_versions (tbl) VALUES ('places'), ('geofences');

CREATE TRIGGER places_tiles_bump
    AFTER INSERT OR UPDATE OR DELETE ON {{data}}.places
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.geogate_tiles_bump();
CREATE TRIGGER places_tiles_bump_truncate
    AFTER TRUNCATE ON {{data}}.places
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.geogate_tiles_bump();
CREATE TRIGGER geofences_tiles_bump
    AFTER INSERT OR UPDATE OR DELETE ON {{data}}.geofences
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.geogate_tiles_bump();
CREATE TRIGGER geofences_tiles_bump_truncate
    AFTER TRUNCATE ON {{data}}.geofences
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.geogate_tiles_bump();

-- +goose Down
DROP TRIGGER geofences_tiles_bump_truncate ON {{data}}.geofences;
DROP TRIGGER geofences_tiles_bump ON {{data}}.geofences;
DROP TRIGGER places_tiles_bump_truncate ON {{data}}.places;
DROP TRIGGER places_tiles_bump ON {{data}}.places;
DROP FUNCTION {{schema}}.geogate_tiles_bump();
DROP TABLE {{schema}}.tile_versions;
