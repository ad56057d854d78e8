-- The layers an API key may read: layer ids or shell patterns over them
-- (see auth.Identity.MayRead). NULL is every layer, so the keys that exist
-- keep reading what they read before. An empty list is refused here as in
-- geogate: it would read as "none" and was more likely meant as "all".

-- +goose Up
ALTER TABLE {{schema}}.api_keys
    ADD COLUMN layers text[] CHECK (cardinality(layers) > 0 AND array_position(layers, NULL) IS NULL);

-- +goose Down
ALTER TABLE {{schema}}.api_keys DROP COLUMN layers;
