-- API keys. Only a SHA-256 hash of each secret is stored; the public key id
-- is what listings, logs and rate limits show. {{schema}} is geogate's own
-- schema (GEOGATE_SCHEMA), filled in when the migrations run.

-- +goose Up
CREATE TABLE {{schema}}.api_keys (
    id          text        PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    secret_hash bytea       NOT NULL UNIQUE CHECK (octet_length(secret_hash) = 32),
    notes       text        NOT NULL DEFAULT '',
    scopes      text[]      NOT NULL DEFAULT '{}',
    tier        text,
    -- [minLng,minLat,maxLng,maxLat] or a GeoJSON (Multi)Polygon; NULL is the whole world.
    geo_scope   jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    revoked_at  timestamptz
);

-- +goose Down
DROP TABLE {{schema}}.api_keys;
