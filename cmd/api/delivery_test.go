package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// hookSecret signs the test subscriptions' deliveries.
const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// addWebhookEvent stores a subscription delivering to webhook and one
// pending event of it, as a position would, and returns the event's id.
func addWebhookEvent(t *testing.T, pool *pgxpool.Pool, webhook, state string) (sub, id string) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `INSERT INTO event_subscriptions (owner, layer, kinds, webhook, secret)
		VALUES ('key:fleet', 'geofences', '{enter}', $1, $2) RETURNING id::text`, webhook, hookSecret).Scan(&sub); err != nil {
		t.Fatal(err)
	}
	id = addEvent(t, pool, sub, state)
	return sub, id
}

// addEvent stores an event of sub in state (dead ones with a failed
// attempt behind them).
func addEvent(t *testing.T, pool *pgxpool.Pool, sub, state string) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(), `INSERT INTO events (subscription, device, layer, fence, kind, time, lng, lat, state, attempts, last_error, dead_at)
		VALUES ($1::uuid, 'truck', 'geofences', '77', 'enter', now(), 4.35, 50.85, $2,
		        CASE WHEN $2 = 'dead' THEN 3 ELSE 0 END, CASE WHEN $2 = 'dead' THEN 'HTTP 500' END, CASE WHEN $2 = 'dead' THEN now() END)
		RETURNING id::text`, sub, state).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// eventState reads an event's delivery state and attempts.
func eventState(t *testing.T, pool *pgxpool.Pool, id string) (string, int) {
	t.Helper()
	var state string
	var attempts int
	err := pool.QueryRow(context.Background(), `SELECT state, attempts FROM events WHERE id = $1::uuid`, id).Scan(&state, &attempts)
	if err != nil {
		return "gone", 0
	}
	return state, attempts
}

// hook is a webhook receiver counting requests per event id. hold, when
// set, is called with the first request of each event, which it keeps
// open until its client goes away.
type hook struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests map[string]int
	accepted map[string]int
	held     chan string
}

func newHook(t *testing.T, hold bool) *hook {
	h := &hook{requests: map[string]int{}, accepted: map[string]int{}}
	if hold {
		h.held = make(chan string, 16)
	}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read to the end: only then does the server notice, and tell
		// through the request's context, that the sender went away.
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("webhook-id")
		h.mu.Lock()
		h.requests[id]++
		first := h.requests[id] == 1
		h.mu.Unlock()
		if first && h.held != nil {
			h.held <- id
			<-r.Context().Done() // until the sender is gone
			return
		}
		h.mu.Lock()
		h.accepted[id]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) counts(id string) (requests, accepted int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[id], h.accepted[id]
}

// TestDeliveryReplicaKilled: a replica killed with SIGKILL while a
// receiver holds its request open loses nothing: once the lease runs out
// another replica delivers the event.
func TestDeliveryReplicaKilled(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	h := newHook(t, true)
	env := map[string]string{
		"DATABASE_URL":           dbURL,
		"REDIS_URL":              testenv.Getenv(t, "TEST_REDIS_URL"),
		"EVENTS_WEBHOOK_TIMEOUT": "5s",
		"EVENTS_LEASE":           "6s",
		"EVENTS_DELIVERY_POLL":   "100ms",
		// the receiver listens on this machine
		"EVENTS_ALLOW_PRIVATE_WEBHOOKS": "true",
	}
	first := startProcess(t, env)
	_, id := addWebhookEvent(t, pool, h.srv.URL+"/hook", "pending")
	select {
	case got := <-h.held:
		if got != id {
			t.Fatalf("held event %s, want %s", got, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the first replica sent nothing\nlogs:\n%s", tail(first.logs.String(), 3000))
	}
	if err := first.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := first.wait(10 * time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the first replica after SIGKILL: %v, want killed", err)
	}
	if state, _ := eventState(t, pool, id); state != "pending" {
		t.Fatalf("after the kill the event is %s, want pending", state)
	}
	second := startProcess(t, env)
	testenv.WaitFor(t, 30*time.Second, "the second replica delivering the event", func() bool {
		state, _ := eventState(t, pool, id)
		return state == "delivered"
	})
	requests, accepted := h.counts(id)
	if requests != 2 || accepted != 1 {
		t.Errorf("the receiver got %d requests and accepted %d, want 2 (the held one, then the second replica's) and 1\nlogs:\n%s",
			requests, accepted, tail(second.logs.String(), 3000))
	}
	if _, attempts := eventState(t, pool, id); attempts != 1 {
		t.Errorf("attempts = %d, want 1: the killed replica recorded nothing", attempts)
	}
}

// TestDeadLetterRoutes lists, replays and drops dead letters over the
// admin API; the OpenAPI document describes every answer.
func TestDeadLetterRoutes(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "EVENTS_DELIVERY_POLL": "100ms", "EVENTS_ALLOW_PRIVATE_WEBHOOKS": "true"}
	ops := "ops-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	h := newHook(t, false)
	sub, replayed := addWebhookEvent(t, pool, h.srv.URL+"/hook", "dead")
	dropped := addEvent(t, pool, sub, "dead")
	otherSub, other := addWebhookEvent(t, pool, h.srv.URL+"/hook", "dead")
	base, _ := startService(t, env)

	var page struct {
		DeadLetters []struct {
			ID, Subscription, LastError string `json:",omitempty"`
			Attempts                    int
			Event                       struct{ ID string }
		} `json:"dead_letters"`
		Next string
	}
	get := func(path string, want int) {
		t.Helper()
		status, _, body := call(t, "GET", base+path, ops, "")
		if status != want {
			t.Fatalf("GET %s = %d %s, want %d", path, status, body, want)
		}
		page.DeadLetters, page.Next = nil, ""
		if want == http.StatusOK {
			if err := json.Unmarshal(body, &page); err != nil {
				t.Fatal(err)
			}
		}
	}
	get("/admin/dead-letters", http.StatusOK)
	if len(page.DeadLetters) != 3 || page.Next != "" {
		t.Fatalf("GET /admin/dead-letters: %d dead letters, next %q; want all 3", len(page.DeadLetters), page.Next)
	}
	get("/admin/dead-letters?subscription="+sub+"&limit=1", http.StatusOK)
	if len(page.DeadLetters) != 1 || page.DeadLetters[0].Event.ID != replayed || page.Next == "" {
		t.Fatalf("first page of %s: %+v, want %s and a next link", sub, page, replayed)
	}
	get(page.Next, http.StatusOK)
	if len(page.DeadLetters) != 1 || page.DeadLetters[0].Event.ID != dropped {
		t.Fatalf("second page: %+v, want %s", page, dropped)
	}
	get("/admin/dead-letters?subscription=nope", http.StatusUnprocessableEntity)

	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/admin/dead-letters/" + replayed + "/replay", http.StatusNoContent},
		{"POST", "/admin/dead-letters/" + replayed + "/replay", http.StatusNotFound}, // pending now
		{"DELETE", "/admin/dead-letters/" + dropped, http.StatusNoContent},
		{"DELETE", "/admin/dead-letters/" + dropped, http.StatusNotFound},
		{"DELETE", "/admin/dead-letters/not-an-id", http.StatusNotFound},
	} {
		if status, _, body := call(t, tc.method, base+tc.path, ops, ""); status != tc.want {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, status, body, tc.want)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the replayed dead letter delivered", func() bool {
		state, _ := eventState(t, pool, replayed)
		return state == "delivered"
	})
	if state, _ := eventState(t, pool, dropped); state != "gone" {
		t.Errorf("the dropped dead letter is %s, want gone", state)
	}
	if state, _ := eventState(t, pool, other); state != "dead" {
		t.Errorf("the untouched dead letter of %s is %s, want dead", otherSub, state)
	}
	if _, accepted := h.counts(replayed); accepted != 1 {
		t.Errorf("the replayed event accepted %d times, want 1", accepted)
	}
}
