-- Delivery workers hear of events they can deliver on a channel of their
-- own. On geogate_events, which live streams follow, every report woke
-- every replica's delivery loop, which then looked for due events twice
-- (a claim and a look at the outbox's age) even when the report's events
-- were all pull-only, as most are on a busy install: hundreds of round
-- trips a second for nothing. geogate_deliveries is announced only when
-- an insert writes a pending (webhook) event.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    s uuid;
BEGIN
    FOR s IN SELECT DISTINCT subscription FROM new_events LOOP
        PERFORM pg_notify('geogate_events', s::text);
    END LOOP;
    IF EXISTS (SELECT FROM new_events WHERE state = 'pending') THEN
        PERFORM pg_notify('geogate_deliveries', '');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{schema}}.events_notify() RETURNS trigger
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
