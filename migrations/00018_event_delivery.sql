-- Webhook delivery keeps the start of an event's retry window apart from
-- its creation: replaying a dead letter gives it a whole window again
-- while created_at still says when its transition happened.
--
-- retry_from  when the current retry window began; NULL: created_at.
-- dead_at     when the event's retries ran out.
--
-- Two small indexes keep the workers' questions as cheap with a backlog
-- of a million events as with none: the oldest pending event (the outbox
-- age), and the events leased right now (in flight, per subscription).

-- +goose Up
ALTER TABLE {{schema}}.events ADD COLUMN retry_from timestamptz;
ALTER TABLE {{schema}}.events ADD COLUMN dead_at timestamptz;
CREATE INDEX events_pending_seq_idx ON {{schema}}.events (seq) WHERE state = 'pending';
CREATE INDEX events_leased_idx ON {{schema}}.events (lease_until) WHERE state = 'pending' AND lease_until IS NOT NULL;

-- +goose Down
DROP INDEX {{schema}}.events_leased_idx;
DROP INDEX {{schema}}.events_pending_seq_idx;
ALTER TABLE {{schema}}.events DROP COLUMN dead_at;
ALTER TABLE {{schema}}.events DROP COLUMN retry_from;
