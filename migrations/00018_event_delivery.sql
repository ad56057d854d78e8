-- Webhook delivery keeps the start of an event's retry window apart from
-- its creation: replaying a dead letter gives it a whole window again
-- while created_at still says when its transition happened.
--
-- retry_from  when the current retry window began; NULL: created_at.
-- dead_at     when the event's retries ran out.

-- +goose Up
ALTER TABLE {{schema}}.events ADD COLUMN retry_from timestamptz;
ALTER TABLE {{schema}}.events ADD COLUMN dead_at timestamptz;

-- +goose Down
ALTER TABLE {{schema}}.events DROP COLUMN dead_at;
ALTER TABLE {{schema}}.events DROP COLUMN retry_from;
