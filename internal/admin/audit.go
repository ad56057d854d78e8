package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Entry is one recorded administrative action.
type Entry struct {
	ID    int64     `json:"id"`
	At    time.Time `json:"at"`
	Actor struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	} `json:"actor"`
	Action string `json:"action"`
	// KeyID or Tier names what the action changed; the other is nil.
	KeyID *string `json:"key_id"`
	Tier  *string `json:"tier"`
	// Changes are, per field, its value (create, replace) or {"from",
	// "to"} (update, revoke); for a rotation its grace period and when the
	// old secret stops working. Never a secret.
	Changes json.RawMessage `json:"changes"`
	// Client is the client address, nil for the CLI.
	Client *string `json:"client"`
}

// AuditQuery selects a page of entries, newest first.
type AuditQuery struct {
	// KeyID, if set, keeps the entries of that key only.
	KeyID string
	// Before, if above 0, keeps entries older than the entry with that id
	// (the last of the previous page).
	Before int64
	// Limit is the page size.
	Limit int
}

// Audit limits.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// record adds an entry for action on key id by a, in tx.
func record(ctx context.Context, tx pgx.Tx, a Actor, action, id string, changes map[string]any) error {
	return insertEntry(ctx, tx, a, action, &id, nil, changes)
}

// recordTier adds an entry for action on tier by a, in tx.
func recordTier(ctx context.Context, tx pgx.Tx, a Actor, action, tier string, changes map[string]any) error {
	return insertEntry(ctx, tx, a, action, nil, &tier, changes)
}

func insertEntry(ctx context.Context, tx pgx.Tx, a Actor, action string, key, tier *string, changes map[string]any) error {
	b, err := json.Marshal(changes)
	if err == nil {
		var client *string
		if a.Client != "" {
			client = &a.Client
		}
		_, err = tx.Exec(ctx, `INSERT INTO admin_audit (actor_kind, actor_id, action, key_id, tier, changes, client)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, a.Kind, a.ID, action, key, tier, b, client)
	}
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// Audit returns a page of entries, newest first, and whether older ones
// follow.
func (s *Service) Audit(ctx context.Context, q AuditQuery) ([]Entry, bool, error) {
	if q.Limit < 1 || q.Limit > MaxAuditLimit {
		q.Limit = DefaultAuditLimit
	}
	rows, err := s.db.Query(ctx, `SELECT id, at, actor_kind, actor_id, action, key_id, tier, changes, client FROM admin_audit
		WHERE ($1 = '' OR key_id = $1) AND ($2 <= 0 OR id < $2)
		ORDER BY id DESC LIMIT $3`, q.KeyID, q.Before, q.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("read the audit trail: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := row.Scan(&e.ID, &e.At, &e.Actor.Kind, &e.Actor.ID, &e.Action, &e.KeyID, &e.Tier, &e.Changes, &e.Client)
		return e, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("read the audit trail: %w", err)
	}
	more := len(entries) > q.Limit
	if more {
		entries = entries[:q.Limit]
	}
	return entries, more, nil
}
