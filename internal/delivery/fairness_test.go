package delivery_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/delivery"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/testenv"
)

// TestDeliveryRotationSignsWithBoth: during a rotation's grace period a
// delivery carries a signature by each secret; after it, by the new one
// only.
func TestDeliveryRotationSignsWithBoth(t *testing.T) {
	f := newFixture(t)
	run(t, f.pool, quick, nil, nil)
	for _, tc := range []struct {
		name  string
		grace time.Duration
		want  int
	}{
		{"in grace", time.Hour, 2},
		{"grace over", time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t)
			owner := "key:" + testenv.Prefix(t)
			sub := f.subscribe(t, owner, r.url())
			rotated, err := f.svc.RotateSecret(context.Background(), owner, sub.ID, tc.grace)
			if err != nil {
				t.Fatal(err)
			}
			r.secrets, r.want = []string{rotated.Secret}, tc.want
			if tc.want == 2 {
				r.secrets = append(r.secrets, sub.Secret)
			}
			testenv.WaitFor(t, 5*time.Second, "the grace period known to have ended or not", func() bool {
				var over bool
				err := f.pool.QueryRow(context.Background(), `SELECT previous_until <= now() FROM event_subscriptions WHERE id = $1::uuid`, sub.ID).Scan(&over)
				if err != nil {
					t.Fatal(err)
				}
				return over == (tc.want == 1)
			})
			n := f.shuttle(t, owner, []string{"a"}, 2)
			f.waitState(t, sub.ID, "delivered", n, 10*time.Second)
		})
	}
}

// TestDeliveryPerSubscriberLimit: a subscriber over its deliveries policy
// has its deliveries put off, not failed, and another subscriber's
// events go out meanwhile.
func TestDeliveryPerSubscriberLimit(t *testing.T) {
	f := newFixture(t)
	limiter, err := ratelimit.New(testenv.Redis(t), map[string]ratelimit.Policy{
		"deliveries": ratelimit.NewPolicy("deliveries", ratelimit.Window{Limit: 5, Period: time.Second}),
	}, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(limiter.Close)
	reg := prometheus.NewRegistry()
	run(t, f.pool, quick, gate.New(access.Settings{}, limiter, nil), delivery.NewMetrics(reg))
	hog, other := newReceiver(t), newReceiver(t)
	prefix := testenv.Prefix(t)
	hogSub := f.subscribe(t, "key:"+prefix+"-hog", hog.url())
	otherSub := f.subscribe(t, "key:"+prefix+"-other", other.url())
	hog.secrets, other.secrets = []string{hogSub.Secret}, []string{otherSub.Secret}
	n := f.shuttle(t, "key:"+prefix+"-hog", []string{"a", "b", "c"}, 4) // 21 events: over 4s of budget
	f.shuttle(t, "key:"+prefix+"-other", []string{"a"}, 1)
	f.waitState(t, otherSub.ID, "delivered", 1, 10*time.Second)
	if got := f.states(t, hogSub.ID)["pending"]; got == 0 {
		t.Errorf("the hog's events all delivered before the other's one; want them limited to 5/s")
	}
	f.waitState(t, hogSub.ID, "delivered", n, 30*time.Second)
	f.checkAllInOrder(t, hog, hogSub.ID)
	var most int
	if err := f.pool.QueryRow(context.Background(), `SELECT max(attempts) FROM events WHERE subscription = $1::uuid`, hogSub.ID).Scan(&most); err != nil {
		t.Fatal(err)
	}
	if most != 1 {
		t.Errorf("an event of the limited subscriber took %d attempts, want 1: a postponement is no attempt", most)
	}
	if got := counter(t, reg, "geogate_events_delivery_postponed_total"); got == 0 {
		t.Error("no delivery postponed; want the hog's put off")
	}
}

// TestDeliveryPerSubscriptionInFlight: a receiver that holds every
// request gets at most PerSubscription at once, and another
// subscription's event is delivered meanwhile.
func TestDeliveryPerSubscriptionInFlight(t *testing.T) {
	f := newFixture(t)
	s := quick
	s.PerSubscription, s.Timeout, s.Lease = 2, 20*time.Second, 30*time.Second
	run(t, f.pool, s, nil, nil)
	release := make(chan struct{})
	var mu sync.Mutex
	var now, most int
	slow, other := newReceiver(t), newReceiver(t)
	slow.answer = func(w http.ResponseWriter, r *http.Request, _ got, _ int) bool {
		mu.Lock()
		now++
		most = max(most, now)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		now--
		mu.Unlock()
		return true
	}
	prefix := testenv.Prefix(t)
	slowSub := f.subscribe(t, "key:"+prefix+"-slow", slow.url())
	otherSub := f.subscribe(t, "key:"+prefix+"-other", other.url())
	slow.secrets, other.secrets = []string{slowSub.Secret}, []string{otherSub.Secret}
	n := f.shuttle(t, "key:"+prefix+"-slow", []string{"a", "b", "c", "d", "e", "f"}, 1)
	testenv.WaitFor(t, 10*time.Second, "two held requests", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return now == 2
	})
	f.shuttle(t, "key:"+prefix+"-other", []string{"a"}, 1)
	f.waitState(t, otherSub.ID, "delivered", 1, 10*time.Second)
	mu.Lock()
	if most != 2 {
		t.Errorf("%d requests of one subscription at once, want PerSubscription 2", most)
	}
	mu.Unlock()
	close(release)
	f.waitState(t, slowSub.ID, "delivered", n, 10*time.Second)
}

// counter reads a counter of reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
