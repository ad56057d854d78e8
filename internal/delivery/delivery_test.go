package delivery_test

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestDeliveryAllInOrder: two workers share one outbox; a receiver that
// answers after a random pause gets every event, once, signed, in order
// per device, and never one event twice at once.
func TestDeliveryAllInOrder(t *testing.T) {
	f := newFixture(t)
	r := newReceiver(t)
	r.answer = func(w http.ResponseWriter, _ *http.Request, _ got, _ int) bool {
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond) // a receiver's own pace
		w.WriteHeader(http.StatusOK)
		return true
	}
	owner := "key:" + testenv.Prefix(t)
	sub := f.subscribe(t, owner, r.url())
	r.secrets = []string{sub.Secret}
	run(t, f.pool, quick, nil, nil)
	run(t, f.pool, quick, nil, nil)
	n := f.shuttle(t, owner, []string{"a", "b", "c", "d"}, 10)
	f.waitState(t, sub.ID, "delivered", n, 30*time.Second)
	f.checkAllInOrder(t, r, sub.ID)
	_, counts := r.snapshot()
	for id, c := range counts {
		if c != 1 {
			t.Errorf("event %s accepted %d times, want once from healthy workers", id, c)
		}
	}
}
