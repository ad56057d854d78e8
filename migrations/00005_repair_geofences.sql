-- Fences loaded before the importer stored invalid polygons in their
-- ST_MakeValid form can still be invalid (self-intersecting borders), and
-- GEOS fails on some spatial tests of them, such as intersecting them with
-- a polygon spatial scope. Repair them the way the importer now does: the
-- polygonal part of ST_MakeValid. The row triggers rebuild their
-- geofence_parts and bump the layer's tile version.

-- +goose Up
UPDATE {{data}}.geofences
SET geom = ST_Multi(ST_CollectionExtract(ST_MakeValid(geom), 3)), updated_at = now()
WHERE NOT ST_IsValid(geom);

-- +goose Down
-- The invalid originals are not kept: nothing to undo.
SELECT 1;
