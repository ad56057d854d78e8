package outbox

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// subscribe makes owner a subscription to the demo fences' events of
// kinds, delivered to webhook ("" pulls them), and returns its id.
func subscribe(t *testing.T, pool *pgxpool.Pool, owner, webhook string, kinds ...string) string {
	t.Helper()
	var id string
	err := pool.QueryRow(context.Background(), `
INSERT INTO geogate.event_subscriptions (owner, layer, kinds, webhook, secret)
VALUES ($1, 'geofences', $2, nullif($3, ''), 'secret') RETURNING id::text`, owner, kinds, webhook).Scan(&id)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return id
}
