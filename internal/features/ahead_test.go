package features

import (
	"context"
	"testing"
	"time"
)

// TestWalking: a next link given out counts as a walk once, within keep
// of being given out; one never given out, never.
func TestWalking(t *testing.T) {
	a := newAhead(1<<20, 50*time.Millisecond, nil)
	a.handOut("k1")
	a.handOut("k2")
	if !a.walking("k1") {
		t.Error("a link just given out is no walk")
	}
	if a.walking("k1") {
		t.Error("a link followed twice counts twice")
	}
	if a.walking("k3") {
		t.Error("a link never given out counts as a walk")
	}
	time.Sleep(60 * time.Millisecond) // past keep
	if a.walking("k2") {
		t.Error("a link followed after keep counts as a walk")
	}
	off := newAhead(0, time.Second, nil)
	off.handOut("k")
	if off.walking("k") {
		t.Error("with no memory for pages read ahead, a walk is seen")
	}
}

// TestAheadBounds: pages read ahead stay within their bytes, a caller
// within perCaller of them, and a page is read once.
func TestAheadBounds(t *testing.T) {
	a := newAhead(100, time.Hour, nil)
	block := make(chan struct{})
	read := func(n int) func(e *early) {
		return func(e *early) {
			<-block
			if !a.grow(e, n) {
				e.err = errTooBig
			}
		}
	}
	for i := range perCaller + 2 {
		a.start("c", walkKey("c", "places", string(rune('a'+i))), read(10))
	}
	a.start("c", walkKey("c", "places", "a"), read(1)) // being read already
	close(block)
	ctx := context.Background()
	var got []int
	var taken []*early
	for i := range perCaller + 2 {
		e := a.take(ctx, walkKey("c", "places", string(rune('a'+i))))
		if e == nil {
			got = append(got, -1)
			continue
		}
		got = append(got, e.size)
		taken = append(taken, e)
	}
	want := []int{10, 10, 10, 10, -1, -1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pages read ahead for caller c: sizes %v, want %v (%d per caller)", got, want, perCaller)
		}
	}
	// The four pages of c still hold 40 of the 100 bytes.
	a.start("d", walkKey("d", "places", "z"), read(95))
	if e := a.take(ctx, walkKey("d", "places", "z")); e == nil || e.err != errTooBig || e.size != 0 {
		t.Errorf("a page past the bytes left: %+v, want it dropped as too big", e)
	}
	if a.take(ctx, walkKey("c", "places", "a")) != nil {
		t.Error("a page taken twice")
	}
	for _, e := range taken {
		a.release(e)
	}
	if a.held != 0 {
		t.Errorf("%d bytes held once every page is released", a.held)
	}
}
