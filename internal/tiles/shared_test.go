package tiles

import (
	"context"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/fairshare"
	"github.com/geogate/geogate/internal/pg"
)

// TestSharedRenderWhoseFirstCallerIsTurnedAway: a heavy caller asks for a
// tile first and waits in the fair queue; a light caller asks for the
// same tile and waits for that render. The queue, overfull, turns away
// its heaviest waiter: no longer the heavy caller's render, which waits
// as the lightest of those it is for, but a newcomer heavier than the
// light caller; then both get the tile.
func TestSharedRenderWhoseFirstCallerIsTurnedAway(t *testing.T) {
	db := fixtureDB(t)
	q := fairshare.New(fairshare.Settings{Slots: 1, MaxWait: 20 * time.Second, MaxQueue: 1})
	s := DefaultSettings()
	s.Cache = false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := New(ctx, pg.Runner{Pool: db, Queue: q}, openCatalog(t, db), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := svc.r.Layer("places")
	if err != nil {
		t.Fatal(err)
	}
	as := func(id string) context.Context { return fairshare.WithCaller(context.Background(), id, 1) }
	// The heavy caller has used the database, and a newcomer a little of
	// it; then someone holds the one slot, so that every render waits.
	for id, used := range map[string]time.Duration{"heavy": 5 * time.Second, "newcomer": time.Second} {
		leave, err := q.Enter(as(id))
		if err != nil {
			t.Fatal(err)
		}
		leave(used)
	}
	hold, err := q.Enter(as("holder"))
	if err != nil {
		t.Fatal(err)
	}
	tile := tileOf(13.4, 52.5, 10)
	heavy, light := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := svc.render(as("heavy"), l, tile, nil, "", 0)
		heavy <- err
	}()
	waitFor(t, func() bool { return q.Waiting() == 1 })
	go func() {
		res, err := svc.render(as("light"), l, tile, nil, "", 0)
		if err == nil && len(res.raw) == 0 {
			err = context.DeadlineExceeded // a tile with nothing in it: not the one asked
		}
		light <- err
	}()
	waitForWaiters(t, &svc.flights, l.cacheName+"|"+tile.String()+"||0", 1)
	// One more call overfills the queue: the heaviest waiter goes.
	newcomer := make(chan error, 1)
	go func() {
		leave, err := q.Enter(as("newcomer"))
		if err == nil {
			leave(time.Millisecond)
		}
		newcomer <- err
	}()
	if err := <-newcomer; apperr.KindOf(err) != apperr.Reduced {
		t.Fatalf("the newcomer = %v, want it turned away for the render a light caller waits for", err)
	}
	hold(time.Millisecond)
	for name, ch := range map[string]chan error{"heavy": heavy, "light": light} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("the %s caller's render = %v, want the tile", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the %s caller had no tile 20 s after the slot came free", name)
		}
	}
}
