-- A subdivided copy of every geofence, for point-in-fence queries: a country
-- border has thousands of vertices, while each part has at most 256, so the
-- GiST index narrows a point to one or two small parts and the exact test
-- stays cheap. Triggers keep the copy right for every writer (the API,
-- imports, plain SQL, TRUNCATE).

-- +goose Up
CREATE TABLE geofence_parts (
    fence_id bigint NOT NULL,
    geom     geometry(Geometry, 4326) NOT NULL
);
CREATE INDEX geofence_parts_geom_idx ON geofence_parts USING gist (geom);
CREATE INDEX geofence_parts_fence_idx ON geofence_parts (fence_id);

-- +goose StatementBegin
CREATE FUNCTION geofence_parts_refresh() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM geofence_parts WHERE fence_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        BEGIN
            INSERT INTO geofence_parts (fence_id, geom)
            SELECT NEW.id, p FROM ST_Subdivide(NEW.geom, 256) AS p;
        EXCEPTION WHEN OTHERS THEN
            -- A geometry GEOS cannot cut (invalid input from a bulk
            -- load) is kept whole: slower to test, never missing.
            INSERT INTO geofence_parts (fence_id, geom) VALUES (NEW.id, NEW.geom);
        END;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION geofence_parts_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE geofence_parts;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER geofence_parts_insert AFTER INSERT ON geofences
    FOR EACH ROW EXECUTE FUNCTION geofence_parts_refresh();
CREATE TRIGGER geofence_parts_update AFTER UPDATE OF id, geom ON geofences
    FOR EACH ROW EXECUTE FUNCTION geofence_parts_refresh();
CREATE TRIGGER geofence_parts_delete AFTER DELETE ON geofences
    FOR EACH ROW EXECUTE FUNCTION geofence_parts_refresh();
CREATE TRIGGER geofence_parts_truncate AFTER TRUNCATE ON geofences
    FOR EACH STATEMENT EXECUTE FUNCTION geofence_parts_truncate();

INSERT INTO geofence_parts (fence_id, geom)
SELECT g.id, p FROM geofences g, ST_Subdivide(g.geom, 256) AS p;

-- +goose Down
DROP TRIGGER geofence_parts_truncate ON geofences;
DROP TRIGGER geofence_parts_delete ON geofences;
DROP TRIGGER geofence_parts_update ON geofences;
DROP TRIGGER geofence_parts_insert ON geofences;
DROP FUNCTION geofence_parts_truncate();
DROP FUNCTION geofence_parts_refresh();
DROP TABLE geofence_parts;
