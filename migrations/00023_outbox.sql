-- The outbox's writes in one place. A report, the fences' exit trigger
-- and the deletion of a subscription each wrote the events table with
-- statements of their own, each taking the outbox locks its own way;
-- they now call these functions, which internal/outbox calls too:
--
-- * outbox_lock takes the outbox lock of each subscription given, in one
--   order for every writer, so that no two wait for each other in a
--   cycle;
-- * outbox_append writes events under those locks, in the order given,
--   for the subscriptions that still exist and ask for the event's kind,
--   each pending when its subscription has a webhook and pull otherwise;
-- * outbox_forget deletes the events of subscriptions under their locks;
-- * outbox_unhook turns a subscription's pending events to pull, under
--   its lock, when its webhook is removed.
--
-- Each statement after a lock runs on its own, so that it sees what every
-- writer that held the lock before it committed.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.outbox_lock(subs text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count(pg_advisory_xact_lock(1734829430, hashtext(l.s)))
    FROM (SELECT DISTINCT s FROM unnest(subs) s ORDER BY s) l;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.outbox_append(subs uuid[], devices text[], layers text[], fences text[], kinds text[],
    times timestamptz[], lngs float8[], lats float8[], causes text[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM {{schema}}.outbox_lock(subs::text[]);
    INSERT INTO {{schema}}.events (subscription, device, layer, fence, kind, time, lng, lat, cause, state)
    SELECT g.s, g.d, g.l, g.f, g.k, g.t, g.x, g.y, g.c,
           CASE WHEN s.webhook IS NULL THEN 'pull' ELSE 'pending' END
    FROM unnest(subs, devices, layers, fences, kinds, times, lngs, lats, causes)
        WITH ORDINALITY AS g(s, d, l, f, k, t, x, y, c, i)
    JOIN {{schema}}.event_subscriptions s ON s.id = g.s
    WHERE g.k = ANY (s.kinds)
    ORDER BY g.i;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.outbox_forget(subs uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {{schema}}.outbox_lock(subs::text[]);
    DELETE FROM {{schema}}.events e WHERE e.subscription = ANY (subs);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.outbox_unhook(sub uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {{schema}}.outbox_lock(ARRAY[sub::text]);
    UPDATE {{schema}}.events SET state = 'pull', lease_until = NULL WHERE subscription = sub AND state = 'pending';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.subscriptions_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {{schema}}.event_memberships m USING old_subscriptions o WHERE m.subscription = o.id;
    PERFORM {{schema}}.outbox_forget(ARRAY(SELECT o.id FROM old_subscriptions o));
    -- A statement of its own, after the locks, so that it sees the stays
    -- of every report that held one of them.
    DELETE FROM {{schema}}.event_memberships m WHERE m.ctid IN (
        SELECT k.ctid FROM {{schema}}.event_memberships k JOIN old_subscriptions o ON k.subscription = o.id
        FOR UPDATE OF k SKIP LOCKED);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

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
    PERFORM {{schema}}.outbox_append(subs, devices, array_fill('geofences'::text, ARRAY[cardinality(subs)]),
        fences, array_fill('exit'::text, ARRAY[cardinality(subs)]), array_fill(now(), ARRAY[cardinality(subs)]),
        lngs, lats, causes);
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
ALTER FUNCTION {{schema}}.fences_exit() SET search_path = pg_catalog, {{data}};
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.subscriptions_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {{schema}}.event_memberships m USING old_subscriptions o WHERE m.subscription = o.id;
    PERFORM count(pg_advisory_xact_lock(1734829430, hashtext(l.s)))
    FROM (SELECT DISTINCT o.id::text AS s FROM old_subscriptions o ORDER BY 1) l;
    DELETE FROM {{schema}}.events e USING old_subscriptions o WHERE e.subscription = o.id;
    DELETE FROM {{schema}}.event_memberships m WHERE m.ctid IN (
        SELECT k.ctid FROM {{schema}}.event_memberships k JOIN old_subscriptions o ON k.subscription = o.id
        FOR UPDATE OF k SKIP LOCKED);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP FUNCTION {{schema}}.outbox_unhook(uuid);
DROP FUNCTION {{schema}}.outbox_forget(uuid[]);
DROP FUNCTION {{schema}}.outbox_append(uuid[], text[], text[], text[], text[], timestamptz[], float8[], float8[], text[]);
DROP FUNCTION {{schema}}.outbox_lock(text[]);
