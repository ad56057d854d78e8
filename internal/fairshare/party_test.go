package fairshare

import (
	"testing"
	"time"
)

// TestPartyIsAdmittedAsItsLightest: a call shared by a heavy caller and,
// once it waits, a light one is served before a medium caller that
// waited before it, and its time is split between the two.
func TestPartyIsAdmittedAsItsLightest(t *testing.T) {
	// Waits long allowed: nobody is turned away for the slow calls.
	q, _ := newQueue(t, Settings{Slots: 1, MaxWait: time.Hour})
	use(t, q, as("heavy", 1), 10*time.Second)
	use(t, q, as("medium", 1), 2*time.Second)
	use(t, q, as("light", 1), 0)
	hold, err := q.Enter(as("holder", 1))
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan entry, 2)
	enterLater(t, q, as("medium", 1), "medium", out)
	party := NewParty(as("heavy", 1))
	enterLater(t, q, WithParty(as("heavy", 1), party), "shared", out)
	party.Join(as("light", 1))
	hold(0)

	first := <-out
	if first.name != "shared" || first.err != nil {
		t.Fatalf("first served: %s (%v), want the shared call, as light as its lightest member", first.name, first.err)
	}
	first.leave(4 * time.Second)
	second := <-out
	if second.name != "medium" || second.err != nil {
		t.Fatalf("second served: %s (%v), want medium", second.name, second.err)
	}
	second.leave(0)

	q.mu.Lock()
	defer q.mu.Unlock()
	if got := q.ids["light"].usage; got < 1.9 || got > 2.1 {
		t.Errorf("light charged %.2f s of the shared call's 4, want half", got)
	}
	if got := q.ids["heavy"].usage; got < 11.5 || got > 12.1 {
		t.Errorf("heavy used %.2f s, want its 10 and half of 4", got)
	}
}
