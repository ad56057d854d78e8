package tiles

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/fairshare"
	"github.com/geogate/geogate/internal/pg"
)

func TestFlightsShareOneCall(t *testing.T) {
	var f flights
	var calls atomic.Int32
	release := make(chan struct{})
	leaderIn := make(chan struct{})
	leader := func(context.Context) (result, error) {
		calls.Add(1)
		close(leaderIn)
		<-release
		return result{version: 7}, nil
	}
	var wg sync.WaitGroup
	got := make([]int64, 5)
	wg.Add(1)
	go func() {
		defer wg.Done()
		r, _, _ := f.do(context.Background(), "k", leader)
		got[0] = r.version
	}()
	<-leaderIn
	for i := 1; i < len(got); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _, _ := f.do(context.Background(), "k", func(context.Context) (result, error) {
				calls.Add(1)
				return result{version: -1}, nil
			})
			got[i] = r.version
		}()
	}
	waitForWaiters(t, &f, "k", len(got)-1)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("calls = %d, want 1", n)
	}
	for i, v := range got {
		if v != 7 {
			t.Errorf("caller %d got version %d, want 7", i, v)
		}
	}
}

func TestFlightsFollowerLeavesWithItsContext(t *testing.T) {
	var f flights
	release := make(chan struct{})
	leaderIn := make(chan struct{})
	go f.do(context.Background(), "k", func(context.Context) (result, error) {
		close(leaderIn)
		<-release
		return result{}, nil
	})
	<-leaderIn
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err, _ := f.do(ctx, "k", func(context.Context) (result, error) { t.Error("follower ran the work"); return result{}, nil })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("follower = %v after %v, want its own deadline", err, time.Since(start))
	}
	close(release)
}

func TestFlightsPanicIsAnErrorAndClearsTheKey(t *testing.T) {
	var f flights
	leaderIn := make(chan struct{})
	proceed := make(chan struct{})
	followerErr := make(chan error, 1)
	go func() {
		defer func() { _ = recover() }()
		f.do(context.Background(), "k", func(context.Context) (result, error) {
			close(leaderIn)
			<-proceed
			panic("boom")
		})
	}()
	<-leaderIn
	go func() {
		_, err, _ := f.do(context.Background(), "k", func(context.Context) (result, error) { return result{}, nil })
		followerErr <- err
	}()
	waitForWaiters(t, &f, "k", 1)
	close(proceed)
	if err := <-followerErr; !errors.Is(err, errFlightPanicked) {
		t.Errorf("follower of a panicking call = %v, want errFlightPanicked", err)
	}
	r, err, _ := f.do(context.Background(), "k", func(context.Context) (result, error) { return result{version: 3}, nil })
	if err != nil || r.version != 3 {
		t.Errorf("call after the panic = %v, %v; want it to run anew", r.version, err)
	}
}

// waitForWaiters waits until n callers wait for the flight of key.
func waitForWaiters(t *testing.T, f *flights, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		got := 0
		if fl, ok := f.m[key]; ok {
			got = fl.waiters
		}
		f.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait for %q, want %d", got, key, n)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

// TestFlightsWorkOutlivesItsFirstCaller: the first caller leaving does
// not end the work while another waits for it, and the one left gets the
// result; once every caller has left, the work's context ends.
func TestFlightsWorkOutlivesItsFirstCaller(t *testing.T) {
	var f flights
	leaderIn, release := make(chan struct{}), make(chan struct{})
	workEnded := make(chan error, 1)
	lctx, leave := context.WithCancel(context.Background())
	leaderDone := make(chan error, 1)
	go func() {
		_, err, _ := f.do(lctx, "k", func(work context.Context) (result, error) {
			close(leaderIn)
			select {
			case <-release:
				return result{version: 9}, nil
			case <-work.Done():
				workEnded <- work.Err()
				return result{}, work.Err()
			}
		})
		leaderDone <- err
	}()
	<-leaderIn
	got := make(chan result, 1)
	go func() {
		r, _, _ := f.do(context.Background(), "k", func(context.Context) (result, error) { return result{}, nil })
		got <- r
	}()
	waitForWaiters(t, &f, "k", 1)
	leave()
	close(release)
	if r := <-got; r.version != 9 {
		t.Errorf("the caller left waiting got version %d, want 9: the work went on", r.version)
	}
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Errorf("the first caller, gone, = %v, want its own cancellation", err)
	}
	select {
	case err := <-workEnded:
		t.Errorf("the work's context ended (%v) while a caller waited", err)
	default:
	}

	// Alone, a caller leaving ends the work.
	lctx, leave = context.WithCancel(context.Background())
	go f.do(lctx, "alone", func(work context.Context) (result, error) {
		<-work.Done()
		workEnded <- work.Err()
		return result{}, work.Err()
	})
	waitForFlight(t, &f, "alone")
	leave()
	select {
	case err := <-workEnded:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the work's context ended with %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the work went on 10 s after every caller left")
	}
}

// TestFlightsSplitTheDatabaseTime: the work's database time is charged to
// the callers that get its result, in equal shares, each on its own
// meter, and to none of them whole.
func TestFlightsSplitTheDatabaseTime(t *testing.T) {
	var f flights
	leaderIn, release := make(chan struct{}), make(chan struct{})
	ctxs := make([]context.Context, 4)
	meters := make([]*pg.Meter, 4)
	for i := range ctxs {
		ctxs[i], meters[i] = pg.WithMeter(context.Background())
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		f.do(ctxs[0], "k", func(work context.Context) (result, error) {
			close(leaderIn)
			<-release
			pg.MeterOf(work).Add(400 * time.Millisecond) // as the render's statements would
			return result{}, nil
		})
	})
	<-leaderIn
	for i := 1; i < len(ctxs); i++ {
		wg.Go(func() { f.do(ctxs[i], "k", func(context.Context) (result, error) { return result{}, nil }) })
	}
	waitForWaiters(t, &f, "k", len(ctxs)-1)
	close(release)
	wg.Wait()
	for i, m := range meters {
		if got := m.DB(); got != 100*time.Millisecond {
			t.Errorf("caller %d was charged %v, want 100ms: a quarter of 400ms", i, got)
		}
	}
}

// waitForFlight waits until a call for key is in flight.
func waitForFlight(t *testing.T, f *flights, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		_, ok := f.m[key]
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call for %q in flight after 10 s", key)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

// TestFlightsWorkIsAdmittedAsItsLightestCaller: a render led by a heavy
// caller, that a light one then waits for too, gets the database's next
// free slot before a medium caller that asked for one earlier.
func TestFlightsWorkIsAdmittedAsItsLightestCaller(t *testing.T) {
	q := fairshare.New(fairshare.Settings{Slots: 1, MaxWait: time.Hour})
	as := func(id string) context.Context { return fairshare.WithCaller(context.Background(), id, 1) }
	charge := func(id string, d time.Duration) {
		leave, err := q.Enter(as(id))
		if err != nil {
			t.Fatal(err)
		}
		leave(d)
	}
	charge("heavy", 10*time.Second)
	charge("medium", 2*time.Second)
	hold, err := q.Enter(as("holder"))
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	go func() {
		if leave, err := q.Enter(as("medium")); err == nil {
			order <- "medium"
			leave(0)
		}
	}()
	waitUntil(t, func() bool { return q.Waiting() == 1 }, "medium waiting")
	var f flights
	var wg sync.WaitGroup
	wg.Go(func() {
		f.do(as("heavy"), "k", func(work context.Context) (result, error) {
			leave, err := q.Enter(work) // as the render does
			if err == nil {
				order <- "render"
				leave(0)
			}
			return result{}, err
		})
	})
	waitUntil(t, func() bool { return q.Waiting() == 2 }, "the render waiting")
	wg.Go(func() { f.do(as("light"), "k", func(context.Context) (result, error) { return result{}, nil }) })
	waitForWaiters(t, &f, "k", 1)
	hold(0)
	if first := <-order; first != "render" {
		t.Errorf("first served: %s, want the render a light caller waits for", first)
	}
	<-order
	wg.Wait()
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}
