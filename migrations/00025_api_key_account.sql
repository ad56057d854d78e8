-- A key may name the account it belongs to: the client that holds it,
-- whatever number of keys that client has. The fair queue in front of
-- PostgreSQL weighs the keys of one account as one caller
-- (DB_FAIR_IDENTITY=account, the default), so that a client spreading its
-- work over many keys is not served as many light callers.

-- +goose Up
ALTER TABLE {{schema}}.api_keys ADD COLUMN account text
    CHECK (account ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$');

-- +goose Down
ALTER TABLE {{schema}}.api_keys DROP COLUMN account;
