-- A report holds its subscriptions' outbox locks from writing its events
-- until it commits, so everything done under them is done one report at
-- a time per subscription. That part now does nothing but write the
-- events, and writing one costs less:
--
-- * events no longer reference event_subscriptions by a foreign key,
--   whose check ran a locking look-up for every event. A statement
--   trigger on event_subscriptions deletes a subscription's events under
--   its outbox lock instead, and every writer of events keeps only those
--   of subscriptions that still exist after taking that lock: an event
--   of a deleted subscription is never left behind.
-- * an event's id is a random UUID, which needs no unique index to stay
--   unique; the one look-up by id, of a dead letter, has an index of its
--   own.
--
-- The fences' exit trigger now ends the stays before it takes the outbox
-- locks, the order positions take them in: a report changes its stays,
-- then locks the outboxes, then writes its events.

-- +goose Up
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_subscription_fkey;
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_id_key;
CREATE INDEX events_dead_id_idx ON {{schema}}.events (id) WHERE state = 'dead';

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.subscriptions_gone() RETURNS trigger
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
CREATE TRIGGER event_subscriptions_gone AFTER DELETE ON {{schema}}.event_subscriptions
    REFERENCING OLD TABLE AS old_subscriptions
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.subscriptions_gone();

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.fences_exit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    subs uuid[];
    devices text[];
    fences text[];
    lngs float8[];
    lats float8[];
    causes text[];
BEGIN
    WITH gone AS (
        SELECT m.subscription, m.device, m.fence, d.lng, d.lat,
               CASE WHEN n.id IS NULL THEN 'fence-deleted' ELSE 'fence-changed' END AS cause
        FROM old_fences o
        JOIN {{schema}}.event_memberships m ON m.fence = o.id::text
        JOIN {{schema}}.event_subscriptions s ON s.id = m.subscription AND s.layer = 'geofences'
        JOIN {{schema}}.event_devices d ON d.owner = s.owner AND d.device = m.device
        LEFT JOIN {{data}}.geofences n ON n.id = o.id
        WHERE n.id IS NULL
           OR NOT ST_Intersects(n.geom, ST_SetSRID(ST_MakePoint(d.lng, d.lat), 4326))
    ), dropped AS (
        DELETE FROM {{schema}}.event_memberships m USING gone g
        WHERE m.subscription = g.subscription AND m.device = g.device AND m.fence = g.fence
        RETURNING m.subscription, m.device, m.fence
    )
    SELECT array_agg(g.subscription ORDER BY g.subscription, g.device, g.fence), array_agg(g.device ORDER BY g.subscription, g.device, g.fence),
           array_agg(g.fence ORDER BY g.subscription, g.device, g.fence), array_agg(g.lng ORDER BY g.subscription, g.device, g.fence),
           array_agg(g.lat ORDER BY g.subscription, g.device, g.fence), array_agg(g.cause ORDER BY g.subscription, g.device, g.fence)
    INTO subs, devices, fences, lngs, lats, causes
    FROM gone g JOIN dropped USING (subscription, device, fence);
    IF subs IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM count(pg_advisory_xact_lock(1734829430, hashtext(l.s)))
    FROM (SELECT DISTINCT u::text AS s FROM unnest(subs) u ORDER BY 1) l;
    -- After the locks, in a statement of its own: a subscription deleted
    -- meanwhile has gone with its events, and gets none.
    INSERT INTO {{schema}}.events (subscription, device, layer, fence, kind, time, lng, lat, cause, state)
    SELECT g.s, g.d, 'geofences', g.f, 'exit', now(), g.x, g.y, g.c,
           CASE WHEN s.webhook IS NULL THEN 'pull' ELSE 'pending' END
    FROM unnest(subs, devices, fences, lngs, lats, causes) WITH ORDINALITY AS g(s, d, f, x, y, c, n)
    JOIN {{schema}}.event_subscriptions s ON s.id = g.s
    WHERE 'exit' = ANY (s.kinds)
    ORDER BY g.n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- CREATE OR REPLACE resets what ALTER FUNCTION set.
ALTER FUNCTION {{schema}}.fences_exit() SET search_path = pg_catalog, {{data}};

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.fences_exit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM count(pg_advisory_xact_lock(1734829430, hashtext(l.s)))
    FROM (SELECT DISTINCT m.subscription::text AS s
          FROM old_fences o
          JOIN {{schema}}.event_memberships m ON m.fence = o.id::text
          JOIN {{schema}}.event_subscriptions s ON s.id = m.subscription AND s.layer = 'geofences'
          ORDER BY 1) l;
    WITH gone AS (
        SELECT m.subscription, m.device, m.fence, d.lng, d.lat,
               CASE WHEN n.id IS NULL THEN 'fence-deleted' ELSE 'fence-changed' END AS cause
        FROM old_fences o
        JOIN {{schema}}.event_memberships m ON m.fence = o.id::text
        JOIN {{schema}}.event_subscriptions s ON s.id = m.subscription AND s.layer = 'geofences'
        JOIN {{schema}}.event_devices d ON d.owner = s.owner AND d.device = m.device
        LEFT JOIN {{data}}.geofences n ON n.id = o.id
        WHERE n.id IS NULL
           OR NOT ST_Intersects(n.geom, ST_SetSRID(ST_MakePoint(d.lng, d.lat), 4326))
    ), dropped AS (
        DELETE FROM {{schema}}.event_memberships m USING gone g
        WHERE m.subscription = g.subscription AND m.device = g.device AND m.fence = g.fence
        RETURNING m.subscription
    )
    INSERT INTO {{schema}}.events (subscription, device, layer, fence, kind, time, lng, lat, cause, state)
    SELECT g.subscription, g.device, 'geofences', g.fence, 'exit', now(), g.lng, g.lat, g.cause,
           CASE WHEN s.webhook IS NULL THEN 'pull' ELSE 'pending' END
    FROM gone g JOIN {{schema}}.event_subscriptions s ON s.id = g.subscription
    WHERE 'exit' = ANY (s.kinds)
    ORDER BY g.subscription, g.device, g.fence;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
ALTER FUNCTION {{schema}}.fences_exit() SET search_path = pg_catalog, {{data}};
DROP TRIGGER event_subscriptions_gone ON {{schema}}.event_subscriptions;
DROP FUNCTION {{schema}}.subscriptions_gone();
DROP INDEX {{schema}}.events_dead_id_idx;
DELETE FROM {{schema}}.events e WHERE NOT EXISTS (SELECT FROM {{schema}}.event_subscriptions s WHERE s.id = e.subscription);
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_id_key UNIQUE (id);
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_subscription_fkey
    FOREIGN KEY (subscription) REFERENCES {{schema}}.event_subscriptions ON DELETE CASCADE;
