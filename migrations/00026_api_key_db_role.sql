-- A key may name the database role its requests run as, on the layers
-- the layer file runs as the caller (as_caller), and claims of its own
-- that the row-level security policies of those layers read from
-- request.jwt.claims (a tenant, a region). Both are set by an operator;
-- the configuration's DB_CALLER_ROLES says which roles are accepted.

-- +goose Up
ALTER TABLE {{schema}}.api_keys ADD COLUMN db_role text
    CHECK (db_role ~ '^[a-z_][a-z0-9_]{0,62}$');
ALTER TABLE {{schema}}.api_keys ADD COLUMN db_claims jsonb
    CHECK (jsonb_typeof(db_claims) = 'object');

-- +goose Down
ALTER TABLE {{schema}}.api_keys DROP COLUMN db_claims;
ALTER TABLE {{schema}}.api_keys DROP COLUMN db_role;
