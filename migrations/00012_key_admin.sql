-- Key administration over HTTP (the /admin/ routes) and from the CLI.
--
-- api_keys gains:
--   overrides              per rate-limit policy, a window list in the
--                          RATELIMIT_<POLICY> syntax ({"geofence": "10/1s"});
--                          NULL is none. Stored and shown, not yet applied.
--   previous_secret_hash   the secret a rotation replaced, which keeps
--   previous_secret_until  working until the end of its grace period.
--
-- Every write to api_keys notifies the channel geogate_keys with the key's
-- id (a TRUNCATE with an empty payload: every key), delivered when the
-- writing transaction commits; each running service drops what it cached
-- of that key at once instead of waiting out API_KEY_CACHE_TTL.
--
-- admin_audit records who changed which key, how, when and from where.
-- It never holds a secret or a secret's hash.

-- +goose Up
ALTER TABLE {{schema}}.api_keys
    ADD COLUMN overrides jsonb CHECK (jsonb_typeof(overrides) = 'object'),
    ADD COLUMN previous_secret_hash bytea UNIQUE CHECK (octet_length(previous_secret_hash) = 32),
    ADD COLUMN previous_secret_until timestamptz,
    ADD CONSTRAINT api_keys_previous_secret CHECK ((previous_secret_hash IS NULL) = (previous_secret_until IS NULL));

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.api_keys_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('geogate_keys', '');
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('geogate_keys', OLD.id);
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.id <> OLD.id) THEN
        PERFORM pg_notify('geogate_keys', NEW.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER api_keys_notify AFTER INSERT OR UPDATE OR DELETE ON {{schema}}.api_keys
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.api_keys_notify();
CREATE TRIGGER api_keys_notify_truncate AFTER TRUNCATE ON {{schema}}.api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.api_keys_notify();

CREATE TABLE {{schema}}.admin_audit (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    -- Who: an identity kind (key, sub, ip) and its id, or cli and the
    -- operating-system user of the command.
    actor_kind text        NOT NULL,
    actor_id   text        NOT NULL,
    action     text        NOT NULL CHECK (action IN ('create', 'replace', 'update', 'revoke', 'rotate')),
    key_id     text        NOT NULL,
    -- What changed: for each field, its new value (create, replace) or
    -- {"from": ..., "to": ...} (update); never a secret.
    changes    jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(changes) = 'object'),
    -- From where: the client address, NULL for the CLI.
    client     text
);
CREATE INDEX admin_audit_key ON {{schema}}.admin_audit (key_id, id);

-- +goose Down
DROP TABLE {{schema}}.admin_audit;
DROP TRIGGER api_keys_notify_truncate ON {{schema}}.api_keys;
DROP TRIGGER api_keys_notify ON {{schema}}.api_keys;
DROP FUNCTION {{schema}}.api_keys_notify();
ALTER TABLE {{schema}}.api_keys
    DROP CONSTRAINT api_keys_previous_secret,
    DROP COLUMN previous_secret_until,
    DROP COLUMN previous_secret_hash,
    DROP COLUMN overrides;
