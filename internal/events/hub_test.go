package events

import (
	"testing"

	"github.com/geogate/geogate/internal/outbox"
)

// woken says whether w has a wake-up waiting, taking it.
func woken(w <-chan struct{}) bool {
	select {
	case <-w:
		return true
	default:
		return false
	}
}

func TestHubWakesTheStreamsOfASubscription(t *testing.T) {
	h := NewHub(nil)
	a, stopA := h.follow("a")
	a2, stopA2 := h.follow("a")
	b, stopB := h.follow("b")
	defer stopB()

	h.Notify(outbox.EventsChannel, "a")
	h.Notify(outbox.EventsChannel, "a") // a second wake-up before the first is taken is the same one
	if got := []bool{woken(a), woken(a), woken(a2), woken(b)}; got[0] != true || got[1] || !got[2] || got[3] {
		t.Errorf("after notifying a: woken a, a again, a2, b = %v, want true, false, true, false", got)
	}

	stopA()
	h.Notify(outbox.EventsChannel, "a")
	if woken(a) || !woken(a2) {
		t.Errorf("a stream that stopped following was woken, or one still following was not")
	}
	stopA2()

	h.WakeAll()
	if !woken(b) {
		t.Errorf("WakeAll did not wake b")
	}
	select {
	case <-h.Stopped():
		t.Fatal("Stopped before Stop")
	default:
	}
	h.Stop()
	h.Stop() // twice does no harm
	<-h.Stopped()
}
