-- layer_parts_of cuts curves into straight segments before taking the
-- polygons: ST_CollectionExtract counts a CurvePolygon or MultiSurface as
-- no polygon at all, so a subdivided copy (api publish --contains) of a
-- layer with curved surfaces left them out, and point-in-polygon through
-- the copy never found them. The cut is the one the layer's other routes
-- use (catalog.Layer.Linear: ST_CurveToLine, 32 segments per quarter
-- circle). A copy built before this migration keeps its old parts until
-- api publish --contains builds it again.
--

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.layer_parts_of(g geometry) RETURNS SETOF geometry
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    a geometry := ST_Force2D(ST_CollectionExtract(
        CASE WHEN ST_GeometryType(g) IN ('ST_CircularString', 'ST_CompoundCurve', 'ST_CurvePolygon',
                                         'ST_MultiCurve', 'ST_MultiSurface', 'ST_GeometryCollection')
             THEN ST_CurveToLine(g) ELSE g END, 3));
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.layer_parts_of(g geometry) RETURNS SETOF geometry
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
