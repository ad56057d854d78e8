-- A stay no longer references its subscription by a foreign key. The
-- key's check took a share lock on the subscription's row for every stay
-- a report began; every report of a busy subscription locks that one row,
-- so PostgreSQL kept building a multixact of all their transactions for
-- it, and the check cost a third of writing a stay.
--
-- A subscription's stays now go as its events do (migration 00019), by
-- its statement trigger, in two steps:
--
-- * before it takes the outbox lock, the stays it sees, waiting for the
--   reports that changed them;
-- * after it, those that reports committed meanwhile. It skips the rows
--   a report still holds: that report has changed a stay of the
--   subscription, so it takes the outbox lock after the deletion commits,
--   finds the subscription gone and deletes the stays left
--   (internal/events).
--
-- A report takes the outbox lock of every subscription it began a stay
-- of, whether or not that stay makes an event, so no stay of a deleted
-- subscription is left behind.

-- +goose Up
ALTER TABLE {{schema}}.event_memberships DROP CONSTRAINT event_memberships_subscription_fkey;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.subscriptions_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {{schema}}.event_memberships m USING old_subscriptions o WHERE m.subscription = o.id;
    PERFORM count(pg_advisory_xact_lock(1734829430, hashtext(l.s)))
    FROM (SELECT DISTINCT o.id::text AS s FROM old_subscriptions o ORDER BY 1) l;
    -- Statements of their own, so that they see the events and stays of
    -- every report that held one of those locks.
    DELETE FROM {{schema}}.events e USING old_subscriptions o WHERE e.subscription = o.id;
    DELETE FROM {{schema}}.event_memberships m WHERE m.ctid IN (
        SELECT k.ctid FROM {{schema}}.event_memberships k JOIN old_subscriptions o ON k.subscription = o.id
        FOR UPDATE OF k SKIP LOCKED);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.subscriptions_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count(pg_advisory_xact_lock(1734829430, hashtext(l.s)))
    FROM (SELECT DISTINCT o.id::text AS s FROM old_subscriptions o ORDER BY 1) l;
    -- A statement of its own, so that it sees the events of every report
    -- that held one of those locks.
    DELETE FROM {{schema}}.events e USING old_subscriptions o WHERE e.subscription = o.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DELETE FROM {{schema}}.event_memberships m WHERE NOT EXISTS (SELECT FROM {{schema}}.event_subscriptions s WHERE s.id = m.subscription);
ALTER TABLE {{schema}}.event_memberships ADD CONSTRAINT event_memberships_subscription_fkey
    FOREIGN KEY (subscription) REFERENCES {{schema}}.event_subscriptions ON DELETE CASCADE;
