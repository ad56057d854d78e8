-- /within now searches every layer through its own geometry index (see
-- 00007): the indexes on (geom::geography) of the demo layers serve no
-- query any more, and cost every write and import their upkeep (PostGIS
-- builds a geography index by inserting every row, far slower than the
-- sorted build of a geometry index).

-- +goose Up
DROP INDEX IF EXISTS {{data}}.places_geog_idx;
DROP INDEX IF EXISTS {{data}}.geofences_geog_idx;

-- +goose Down
CREATE INDEX places_geog_idx ON {{data}}.places USING gist ((geom::geography));
CREATE INDEX geofences_geog_idx ON {{data}}.geofences USING gist ((geom::geography));
