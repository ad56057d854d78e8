package delivery_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/delivery"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/testenv"
)

// TestDeliveryFailingReceivers: receivers that fail, time out or answer
// slowly get every event in the end, in order, and each failed attempt
// is counted and explained.
func TestDeliveryFailingReceivers(t *testing.T) {
	s := quick
	s.Timeout, s.Lease = 300*time.Millisecond, time.Second
	tests := []struct {
		name string
		// answer answers an event's attempt-th request.
		answer func(w http.ResponseWriter, r *http.Request, attempt int) bool
		// wantAttempts is each event's attempts once delivered.
		wantAttempts int
		wantError    string
	}{
		{"500 twice", func(w http.ResponseWriter, _ *http.Request, attempt int) bool {
			if attempt <= 2 {
				w.WriteHeader(http.StatusInternalServerError)
				return false
			}
			return true
		}, 3, "HTTP 500"},
		{"times out once", func(w http.ResponseWriter, r *http.Request, attempt int) bool {
			if attempt == 1 {
				<-r.Context().Done() // the sender gives up first
				return false
			}
			return true
		}, 2, "no answer within 300ms"},
		{"redirects once", func(w http.ResponseWriter, r *http.Request, attempt int) bool {
			if attempt == 1 {
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
				return false
			}
			return true
		}, 2, "HTTP 302"},
		{"slow", func(w http.ResponseWriter, _ *http.Request, _ int) bool {
			time.Sleep(100 * time.Millisecond) // slower than most, within the timeout
			return true
		}, 1, ""},
	}
	f := newFixture(t)
	run(t, f.pool, s, nil, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t)
			r.answer = func(w http.ResponseWriter, req *http.Request, _ got, attempt int) bool {
				return tc.answer(w, req, attempt)
			}
			owner := "key:" + testenv.Prefix(t)
			sub := f.subscribe(t, owner, r.url())
			r.secrets = []string{sub.Secret}
			n := f.shuttle(t, owner, []string{"a", "b"}, 3)
			f.waitState(t, sub.ID, "delivered", n, 30*time.Second)
			f.checkAllInOrder(t, r, sub.ID)
			rows, err := f.pool.Query(context.Background(), `SELECT id::text, attempts FROM events WHERE subscription = $1::uuid`, sub.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var attempts int
				if err := rows.Scan(&id, &attempts); err != nil {
					t.Fatal(err)
				}
				if attempts != tc.wantAttempts || r.attempts(id) != tc.wantAttempts {
					t.Errorf("event %s: %d attempts recorded, %d received; want %d", id, attempts, r.attempts(id), tc.wantAttempts)
				}
			}
		})
	}
}

// TestDeliveryRecordsWhy: a failing attempt leaves its reason, without
// the webhook's URL, and a retry due within the backoff's cap.
func TestDeliveryRecordsWhy(t *testing.T) {
	s := quick
	s.RetryMin, s.RetryMax = time.Hour, time.Hour // one attempt, then a long wait
	f := newFixture(t)
	r := newReceiver(t)
	r.answer = func(w http.ResponseWriter, _ *http.Request, _ got, _ int) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return false
	}
	owner := "key:" + testenv.Prefix(t)
	sub := f.subscribe(t, owner, r.url()+"?token=hush")
	r.secrets = []string{sub.Secret}
	run(t, f.pool, s, nil, nil)
	f.shuttle(t, owner, []string{"a"}, 1)
	var why string
	var wait time.Duration
	testenv.WaitFor(t, 10*time.Second, "a failed attempt recorded", func() bool {
		err := f.pool.QueryRow(context.Background(), `SELECT coalesce(last_error, ''), extract(epoch FROM next_at - now()) * interval '1 second'
			FROM events WHERE subscription = $1::uuid`, sub.ID).Scan(&why, &wait)
		if err != nil {
			t.Fatal(err)
		}
		return why != ""
	})
	if why != "HTTP 503" {
		t.Errorf("last_error = %q, want HTTP 503", why)
	}
	if wait <= 0 || wait > time.Hour {
		t.Errorf("next attempt in %v, want within the backoff's hour", wait)
	}
}

// TestDeliveryRetryAfter: a 429's Retry-After sets the next attempt.
func TestDeliveryRetryAfter(t *testing.T) {
	f := newFixture(t)
	r := newReceiver(t)
	r.answer = func(w http.ResponseWriter, _ *http.Request, _ got, attempt int) bool {
		if attempt == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return false
		}
		return true
	}
	owner := "key:" + testenv.Prefix(t)
	sub := f.subscribe(t, owner, r.url())
	r.secrets = []string{sub.Secret}
	run(t, f.pool, quick, nil, nil)
	f.shuttle(t, owner, []string{"a"}, 1)
	f.waitState(t, sub.ID, "delivered", 1, 10*time.Second)
	var gap time.Duration
	reqs, _ := r.snapshot()
	if err := f.pool.QueryRow(context.Background(), `SELECT (delivered_at - created_at) FROM events WHERE subscription = $1::uuid`, sub.ID).Scan(&gap); err != nil {
		t.Fatal(err)
	}
	if gap < time.Second {
		t.Errorf("delivered %v after creation, want the Retry-After's second at least (backoff alone: %v at most)", gap, quick.RetryMax)
	}
	if len(reqs) != 1 {
		t.Errorf("%d accepted requests, want 1", len(reqs))
	}
}

// TestDeliveryReceiverGoneAndBack: while nothing listens at the webhook,
// deliveries fail and are retried; once a receiver listens there again,
// every event arrives in order.
func TestDeliveryReceiverGoneAndBack(t *testing.T) {
	f := newFixture(t)
	r := newReceiver(t)
	addr := r.srv.Listener.Addr().String()
	owner := "key:" + testenv.Prefix(t)
	sub := f.subscribe(t, owner, r.url())
	r.secrets = []string{sub.Secret}
	r.close() // gone: connections to addr are refused
	run(t, f.pool, quick, nil, nil)
	n := f.shuttle(t, owner, []string{"a", "b"}, 4)
	var why string
	testenv.WaitFor(t, 10*time.Second, "a refused delivery retried", func() bool {
		err := f.pool.QueryRow(context.Background(), `SELECT coalesce(max(last_error), '') FROM events
			WHERE subscription = $1::uuid AND attempts >= 2`, sub.ID).Scan(&why)
		if err != nil {
			t.Fatal(err)
		}
		return why != ""
	})
	if want := "connection refused"; !strings.Contains(why, want) {
		t.Errorf("last_error = %q, want it to say %q", why, want)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	// Its secrets are set before it serves: deliveries are being retried.
	back := newReceiverOn(t, ln, r.secrets)
	f.waitState(t, sub.ID, "delivered", n, 30*time.Second)
	f.checkAllInOrder(t, back, sub.ID)
}

// TestDeliveryDeadLetters: a receiver that always fails sends events to
// the dead letters once RetryFor has passed; a replay delivers one, a
// drop removes the other.
func TestDeliveryDeadLetters(t *testing.T) {
	s := quick
	s.RetryFor = 500 * time.Millisecond
	f := newFixture(t)
	r := newReceiver(t)
	failing := true
	var mu = &r.mu
	r.answer = func(w http.ResponseWriter, _ *http.Request, _ got, _ int) bool {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusBadGateway)
			return false
		}
		return true
	}
	owner := "key:" + testenv.Prefix(t)
	sub := f.subscribe(t, owner, r.url())
	r.secrets = []string{sub.Secret}
	m := delivery.NewMetrics(nil)
	run(t, f.pool, s, nil, m)
	start := time.Now()
	n := f.shuttle(t, owner, []string{"a"}, 2) // enter, exit, enter
	f.waitState(t, sub.ID, "dead", n, 30*time.Second)
	if took := time.Since(start); took < s.RetryFor {
		t.Errorf("dead after %v, want after RetryFor %v", took, s.RetryFor)
	}
	dead := outbox.NewDeadLetters(runner(f))
	page, more, err := dead.List(context.Background(), outbox.DeadQuery{Subscription: sub.ID, Limit: 2})
	if err != nil || len(page) != 2 || !more {
		t.Fatalf("List(limit 2) = %d dead letters, more %v, %v; want 2 and more", len(page), more, err)
	}
	rest, more, err := dead.List(context.Background(), outbox.DeadQuery{Subscription: sub.ID, After: page[1].Seq})
	if err != nil || len(rest) != 1 || more {
		t.Fatalf("List(after %d) = %d, more %v, %v; want the last one", page[1].Seq, len(rest), more, err)
	}
	// The head was retried all through the window; the events behind it
	// waited their turn, which came once the window had passed: one
	// attempt each.
	for i, dl := range append(page, rest...) {
		if dl.Attempts < 1 || (i == 0 && dl.Attempts < 2) || dl.LastError != "HTTP 502" || dl.DeadAt == nil || dl.Event.ID != dl.ID {
			t.Errorf("dead letter %d %+v: want attempts (several for the head), HTTP 502, a dead_at and its event", i, dl)
		}
	}
	if err := dead.Drop(context.Background(), page[0].ID); err != nil {
		t.Fatalf("Drop() = %v", err)
	}
	if err := dead.Drop(context.Background(), page[0].ID); err == nil {
		t.Error("Drop() of a dropped dead letter = nil, want not found")
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	for _, dl := range []outbox.DeadLetter{page[1], rest[0]} {
		if err := dead.Replay(context.Background(), dl.ID); err != nil {
			t.Fatalf("Replay() = %v", err)
		}
	}
	f.waitState(t, sub.ID, "delivered", 2, 10*time.Second)
	if _, counts := r.snapshot(); counts[page[1].ID] != 1 || counts[rest[0].ID] != 1 || counts[page[0].ID] != 0 {
		t.Errorf("accepted %v; want the replayed two once each, the dropped one never", counts)
	}
	if err := dead.Replay(context.Background(), "not-a-uuid"); err == nil {
		t.Error("Replay(not-a-uuid) = nil, want not found")
	}
}

// TestDeliveryRefusesPrivateAddresses: where private webhooks are not
// allowed, a webhook whose name resolves to this machine is never
// connected to, and the attempt says why.
func TestDeliveryRefusesPrivateAddresses(t *testing.T) {
	s := quick
	s.Webhooks.AllowPrivate = false
	s.RetryMin, s.RetryMax = time.Hour, time.Hour
	f := newFixture(t)
	r := newReceiver(t)
	reached := make(chan struct{}, 1)
	r.answer = func(w http.ResponseWriter, _ *http.Request, _ got, _ int) bool {
		reached <- struct{}{}
		return true
	}
	owner := "key:" + testenv.Prefix(t)
	// "localhost" rather than the address: the check is on the address
	// connected to, after the name is resolved.
	sub := f.subscribe(t, owner, strings.Replace(r.url(), "127.0.0.1", "localhost", 1))
	run(t, f.pool, s, nil, nil)
	f.shuttle(t, owner, []string{"a"}, 1)
	var why string
	testenv.WaitFor(t, 10*time.Second, "a refused attempt recorded", func() bool {
		if err := f.pool.QueryRow(context.Background(), `SELECT coalesce(last_error, '') FROM events WHERE subscription = $1::uuid`, sub.ID).Scan(&why); err != nil {
			t.Fatal(err)
		}
		return why != ""
	})
	if !strings.Contains(why, "private network") {
		t.Errorf("last_error = %q, want the private-address refusal", why)
	}
	select {
	case <-reached:
		t.Error("the receiver on this machine was reached")
	default:
	}
}
