-- Geofence events: devices report positions, subscriptions watch polygon
-- layers, and each transition of a (device, fence) pair becomes one event.
--
-- event_devices    each device's last position, per owner (the identity
--                  that reports it: key:<id> or sub:<subject>). Two
--                  owners never share a device, whatever its id.
-- event_positions  every position reported, late ones included.
-- event_subscriptions  what an owner watches (a layer, optionally a CQL2
--                  filter and device ids, the kinds of event) and where
--                  events go (a webhook, or pull only).
-- event_memberships    per subscription, the fences each device is in,
--                  since when, and whether its dwell was told.
-- events           the outbox: written in the transaction that records
--                  the transition, so an event exists exactly when its
--                  transition does; the delivery columns say how far its
--                  webhook delivery has come.
--
-- Every insert into events notifies geogate_events (payload: the
-- subscription id) when its transaction commits: the delivery workers and
-- the live streams wake on it.

-- +goose Up
CREATE TABLE {{schema}}.event_devices (
    owner      text             NOT NULL,
    device     text             NOT NULL,
    -- the last position: NULL until the first arrives
    time       timestamptz,
    lng        double precision,
    lat        double precision,
    accuracy   double precision,
    updated_at timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, device)
) WITH (fillfactor = 50); -- each report rewrites its devices' rows: room for in-page (HOT) updates

CREATE TABLE {{schema}}.event_positions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner       text             NOT NULL,
    device      text             NOT NULL,
    time        timestamptz      NOT NULL,
    lng         double precision NOT NULL,
    lat         double precision NOT NULL,
    accuracy    double precision,
    speed       double precision,
    heading     double precision,
    -- late: older than the device's last position when it arrived, so it
    -- caused no transition.
    late        boolean          NOT NULL DEFAULT false,
    received_at timestamptz      NOT NULL DEFAULT now()
);
CREATE INDEX event_positions_device_idx ON {{schema}}.event_positions (owner, device, time);

CREATE TABLE {{schema}}.event_subscriptions (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner           text        NOT NULL,
    layer           text        NOT NULL,
    filter          text,
    devices         text[],
    kinds           text[]      NOT NULL,
    dwell_ms        bigint      CHECK (dwell_ms > 0),
    webhook         text,
    secret          text        NOT NULL,
    previous_secret text,
    previous_until  timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_subscriptions_owner_idx ON {{schema}}.event_subscriptions (owner);

CREATE TABLE {{schema}}.event_memberships (
    subscription uuid        NOT NULL REFERENCES {{schema}}.event_subscriptions ON DELETE CASCADE,
    device       text        NOT NULL,
    fence        text        NOT NULL,
    entered_at   timestamptz NOT NULL,
    dwelled      boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (subscription, device, fence)
);
CREATE INDEX event_memberships_fence_idx ON {{schema}}.event_memberships (fence);

CREATE TABLE {{schema}}.events (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           uuid             NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    subscription uuid             NOT NULL REFERENCES {{schema}}.event_subscriptions ON DELETE CASCADE,
    device       text             NOT NULL,
    layer        text             NOT NULL,
    fence        text             NOT NULL,
    kind         text             NOT NULL CHECK (kind IN ('enter', 'exit', 'dwell', 'cross')),
    time         timestamptz      NOT NULL,
    lng          double precision NOT NULL,
    lat          double precision NOT NULL,
    -- cause: a position, or a change of the fence itself
    cause        text             NOT NULL DEFAULT 'position' CHECK (cause IN ('position', 'fence-deleted', 'fence-changed')),
    created_at   timestamptz      NOT NULL DEFAULT clock_timestamp(),
    -- Webhook delivery: pending until a receiver took it (delivered) or
    -- its retries ran out (dead); pull-only subscriptions' events are
    -- 'pull' from the start.
    state        text             NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead', 'pull')),
    attempts     integer          NOT NULL DEFAULT 0,
    next_at      timestamptz      NOT NULL DEFAULT now(),
    lease_until  timestamptz,
    last_error   text,
    delivered_at timestamptz
);
CREATE INDEX events_subscription_idx ON {{schema}}.events (subscription, seq);
CREATE INDEX events_pending_idx ON {{schema}}.events (subscription, device, seq) WHERE state = 'pending';
CREATE INDEX events_due_idx ON {{schema}}.events (next_at) WHERE state = 'pending';
CREATE INDEX events_dead_idx ON {{schema}}.events (seq) WHERE state = 'dead';

-- +goose StatementBegin
CREATE FUNCTION {{schema}}.events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    s uuid;
BEGIN
    FOR s IN SELECT DISTINCT subscription FROM new_events LOOP
        PERFORM pg_notify('geogate_events', s::text);
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER events_notify AFTER INSERT ON {{schema}}.events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.events_notify();

-- A fence deleted or moved away from a device ends its stay: the exit is
-- written in the transaction that changes the fence. Only the built-in
-- fences have this trigger; on other layers the exit comes with the
-- device's next position.
-- +goose StatementBegin
CREATE FUNCTION {{schema}}.fences_exit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    -- The outbox locks of the subscriptions concerned, in the order
    -- positions take them (internal/events), before any stay changes.
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
CREATE TRIGGER geofences_exit_delete AFTER DELETE ON {{data}}.geofences
    REFERENCING OLD TABLE AS old_fences
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.fences_exit();
CREATE TRIGGER geofences_exit_update AFTER UPDATE ON {{data}}.geofences
    REFERENCING OLD TABLE AS old_fences
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.fences_exit();

-- +goose Down
DROP TRIGGER geofences_exit_update ON {{data}}.geofences;
DROP TRIGGER geofences_exit_delete ON {{data}}.geofences;
DROP FUNCTION {{schema}}.fences_exit();
DROP TABLE {{schema}}.events;
DROP FUNCTION {{schema}}.events_notify();
DROP TABLE {{schema}}.event_memberships;
DROP TABLE {{schema}}.event_subscriptions;
DROP TABLE {{schema}}.event_positions;
DROP TABLE {{schema}}.event_devices;
