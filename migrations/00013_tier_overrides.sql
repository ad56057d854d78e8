-- Rate-limit overrides per tier, changed while the service runs.
--
-- tier_overrides holds, per tier and rate-limit policy, the window list
-- (RATELIMIT_<POLICY> syntax, "100/1s,10000/1d@calendar") that callers of
-- that tier get instead of the policy's own windows. Every write notifies
-- the channel geogate_limits when its transaction commits, as any write
-- to api_keys (whose overrides column holds per-key overrides) notifies
-- geogate_keys: each running service re-reads the overrides and applies
-- them within a second.
--
-- admin_audit records tier changes too: its entries name either a key or
-- a tier.

-- +goose Up
CREATE TABLE {{schema}}.tier_overrides (
    tier       text        NOT NULL,
    policy     text        NOT NULL,
    windows    text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tier, policy)
);

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.tier_overrides_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('geogate_limits', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER tier_overrides_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {{schema}}.tier_overrides
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.tier_overrides_notify();

ALTER TABLE {{schema}}.admin_audit
    DROP CONSTRAINT admin_audit_action_check,
    ADD CONSTRAINT admin_audit_action_check
        CHECK (action IN ('create', 'replace', 'update', 'revoke', 'rotate', 'set-tier', 'delete-tier')),
    ALTER COLUMN key_id DROP NOT NULL,
    ADD COLUMN tier text,
    ADD CONSTRAINT admin_audit_subject CHECK ((key_id IS NULL) <> (tier IS NULL));

-- +goose Down
DELETE FROM {{schema}}.admin_audit WHERE tier IS NOT NULL;
ALTER TABLE {{schema}}.admin_audit
    DROP CONSTRAINT admin_audit_subject,
    DROP COLUMN tier,
    ALTER COLUMN key_id SET NOT NULL,
    DROP CONSTRAINT admin_audit_action_check,
    ADD CONSTRAINT admin_audit_action_check
        CHECK (action IN ('create', 'replace', 'update', 'revoke', 'rotate'));
DROP TRIGGER tier_overrides_notify ON {{schema}}.tier_overrides;
DROP FUNCTION {{schema}}.tier_overrides_notify();
DROP TABLE {{schema}}.tier_overrides;
