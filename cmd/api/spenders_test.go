package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestBackgroundSpendersAskTheGate walks the work that spends a policy
// with no request of its own, as TestGateWalksEveryRoute walks the
// routes: webhook delivery asks the gate for each delivery, charged to
// the subscription's owner under the deliveries policy, so that an owner
// over it has its deliveries put off (not failed) and its key's usage
// shows them. Retention spends no identity's policy: it is the
// operator's housekeeping, bounded by its own batch size.
func TestBackgroundSpendersAskTheGate(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL": dbURL, "RATELIMIT_DELIVERIES": "1/1h",
		"EVENTS_ALLOW_PRIVATE_WEBHOOKS": "true", "EVENTS_ALLOW_HTTP_WEBHOOKS": "true",
	}
	owner := "spender-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", owner, "--secret", owner, "--scopes", "events:read")
	ops := owner + "-ops"
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	h := newHook(t, false)
	ctx := context.Background()
	var sub string
	if err := pool.QueryRow(ctx, `INSERT INTO event_subscriptions (owner, layer, kinds, webhook, secret)
		VALUES ($1, 'geofences', '{enter}', $2, $3) RETURNING id::text`, "key:"+owner, h.srv.URL, hookSecret).Scan(&sub); err != nil {
		t.Fatal(err)
	}
	ids := []string{addEvent(t, pool, sub, "pending"), addEvent(t, pool, sub, "pending"), addEvent(t, pool, sub, "pending")}
	base, _ := startService(t, env)

	type day struct {
		Policy            string
		Admitted, Refused int
	}
	usage := func() (admitted, refused int) {
		t.Helper()
		code, _, body := call(t, "GET", base+"/admin/keys/"+owner+"/usage?days=1", ops, "")
		var u struct{ Usage []day }
		if err := json.Unmarshal(body, &u); code != 200 || err != nil {
			t.Fatalf("usage = %d %s", code, body)
		}
		for _, d := range u.Usage {
			if d.Policy == "deliveries" {
				return d.Admitted, d.Refused
			}
		}
		return 0, 0
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) { // polling the worker's progress
		if a, r := usage(); a == 1 && r >= 1 {
			break
		}
		if time.Now().After(deadline) {
			a, r := usage()
			t.Fatalf("deliveries of the owner admitted %d, refused %d after 20 s; want 1 and at least 1", a, r)
		}
	}
	delivered := 0
	for _, id := range ids {
		state, attempts := eventState(t, pool, id)
		switch {
		case state == "delivered":
			delivered++
		case state != "pending" || attempts != 0:
			t.Errorf("event %s is %s after %d attempts, want pending with none: a delivery over the owner's limit is put off, not tried", id, state, attempts)
		}
	}
	if delivered != 1 {
		t.Errorf("%d events delivered, want the 1 the owner's deliveries policy admits", delivered)
	}
}
