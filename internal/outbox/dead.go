package outbox

import (
	"context"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/pg"
)

// DeadLetters lists, replays and drops the events whose retries ran out.
type DeadLetters struct {
	db pg.Runner
}

// NewDeadLetters returns the dead letters of the outbox db holds.
func NewDeadLetters(db pg.Runner) *DeadLetters { return &DeadLetters{db: db} }

// DeadLetter is an event whose retries ran out, and why.
type DeadLetter struct {
	ID           string     `json:"id"`
	Seq          int64      `json:"seq"`
	Subscription string     `json:"subscription"`
	Attempts     int        `json:"attempts"`
	LastError    string     `json:"last_error"`
	CreatedAt    time.Time  `json:"created_at"`
	DeadAt       *time.Time `json:"dead_at"`
	Event        CloudEvent `json:"event"`
}

// DeadQuery selects a page of dead letters, oldest first.
type DeadQuery struct {
	// Subscription, when set, keeps that subscription's only.
	Subscription string
	// After, when above 0, keeps the dead letters numbered after it (the
	// last of the previous page).
	After int64
	Limit int
}

// Dead-letter page sizes.
const (
	DefaultDeadLimit = 100
	MaxDeadLimit     = 1000
)

var errNoDeadLetter = apperr.New(apperr.NotFound, "No such dead letter: GET /admin/dead-letters lists them.")

// List returns a page of dead letters and whether more follow.
func (d *DeadLetters) List(ctx context.Context, q DeadQuery) ([]DeadLetter, bool, error) {
	if q.Limit < 1 || q.Limit > MaxDeadLimit {
		q.Limit = DefaultDeadLimit
	}
	out := []DeadLetter{}
	err := d.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		rows, err := conn.Query(ctx, `SELECT `+eventColumns+`, e.attempts, coalesce(e.last_error, ''), e.dead_at
FROM events e
WHERE e.state = 'dead' AND ($1 = '' OR e.subscription = nullif($1, '')::uuid) AND e.seq > $2
ORDER BY e.seq LIMIT $3`, q.Subscription, q.After, q.Limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var dl DeadLetter
			e, err := scanEvent(rows.Scan, &dl.Attempts, &dl.LastError, &dl.DeadAt)
			if err != nil {
				return err
			}
			dl.ID, dl.Seq, dl.Subscription, dl.CreatedAt, dl.Event = e.ID, e.Seq, e.Subscription, e.Created, e.CloudEvent()
			out = append(out, dl)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, false, err
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	return out, more, nil
}

// Replay makes dead letter id pending again, due now, with no attempts
// and a whole retry window from now, and wakes the delivery workers.
func (d *DeadLetters) Replay(ctx context.Context, id string) error {
	return d.one(ctx, id, `WITH r AS (
  UPDATE events SET state = 'pending', attempts = 0, next_at = now(), retry_from = now(),
    lease_until = NULL, dead_at = NULL
  WHERE id = $1::uuid AND state = 'dead'
  RETURNING subscription)
SELECT count(pg_notify('`+DeliveriesChannel+`', subscription::text)) FROM r`)
}

// Drop deletes dead letter id: it will never be delivered.
func (d *DeadLetters) Drop(ctx context.Context, id string) error {
	return d.one(ctx, id, `WITH r AS (DELETE FROM events WHERE id = $1::uuid AND state = 'dead' RETURNING 1)
SELECT count(*) FROM r`)
}

// one runs sql, which counts the dead letters it changed, on id.
func (d *DeadLetters) one(ctx context.Context, id, sql string) error {
	if !ValidID(id) {
		return errNoDeadLetter
	}
	var n int64
	err := d.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		return conn.QueryRow(ctx, sql, id).Scan(&n)
	})
	if err == nil && n == 0 {
		return errNoDeadLetter
	}
	return err
}
