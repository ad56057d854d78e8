-- A subdivided copy of every geofence, for point-in-fence queries: a country
-- border has thousands of vertices, while each part has at most 256, so the
-- GiST index narrows a point to one or two small parts and the exact test
-- stays cheap. Triggers keep the copy right for every writer (the API,
-- imports, plain SQL, TRUNCATE).

-- +goose Up
CREATE TABLE {{schema}}.geofence_parts (
    fence_id bigint NOT NULL,
    geom     geometry(Geometry, 4326) NOT NULL
);
CREATE INDEX geofence_parts_geom_idx ON {{schema}}.geofence_parts USING gist (geom);
CREATE INDEX geofence_parts_fence_idx ON {{schema}}.geofence_parts (fence_id);

-- geofence_parts_build stores the parts of one fence. GEOS cannot cut an
-- invalid geometry (bulk loads bring self-intersecting borders), so those
-- are cut in their ST_MakeValid form; only if that fails too is the fence
-- kept whole: slower to test, never missing.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.geofence_parts_build(fence bigint, g geometry) RETURNS void
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
CREATE FUNCTION {{schema}}.geofence_parts_refresh() RETURNS trigger
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
CREATE FUNCTION {{schema}}.geofence_parts_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE {{schema}}.geofence_parts;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER geofence_parts_insert AFTER INSERT ON {{data}}.geofences
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.geofence_parts_refresh();
CREATE TRIGGER geofence_parts_update AFTER UPDATE OF id, geom ON {{data}}.geofences
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.geofence_parts_refresh();
CREATE TRIGGER geofence_parts_delete AFTER DELETE ON {{data}}.geofences
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.geofence_parts_refresh();
CREATE TRIGGER geofence_parts_truncate AFTER TRUNCATE ON {{data}}.geofences
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.geofence_parts_truncate();

SELECT {{schema}}.geofence_parts_build(id, geom) FROM {{data}}.geofences;

-- +goose Down
DROP TRIGGER geofence_parts_truncate ON {{data}}.geofences;
DROP TRIGGER geofence_parts_delete ON {{data}}.geofences;
DROP TRIGGER geofence_parts_update ON {{data}}.geofences;
DROP TRIGGER geofence_parts_insert ON {{data}}.geofences;
DROP FUNCTION {{schema}}.geofence_parts_truncate();
DROP FUNCTION {{schema}}.geofence_parts_refresh();
DROP FUNCTION {{schema}}.geofence_parts_build(bigint, geometry);
DROP TABLE {{schema}}.geofence_parts;
