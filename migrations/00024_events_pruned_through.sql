-- Each subscription remembers the last of its events that retention
-- deleted, so that a reader whose cursor is older than what is kept is
-- told so (410) rather than silently missing what was pruned.

-- +goose Up
ALTER TABLE {{schema}}.event_subscriptions ADD COLUMN pruned_through bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {{schema}}.event_subscriptions DROP COLUMN pruned_through;
