package tiles

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFlightsShareOneCall(t *testing.T) {
	var f flights
	var calls atomic.Int32
	release := make(chan struct{})
	leaderIn := make(chan struct{})
	leader := func() (result, error) {
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
		r, _ := f.do(context.Background(), "k", leader)
		got[0] = r.version
	}()
	<-leaderIn
	for i := 1; i < len(got); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := f.do(context.Background(), "k", func() (result, error) {
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
	go f.do(context.Background(), "k", func() (result, error) {
		close(leaderIn)
		<-release
		return result{}, nil
	})
	<-leaderIn
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.do(ctx, "k", func() (result, error) { t.Error("follower ran the work"); return result{}, nil })
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
		f.do(context.Background(), "k", func() (result, error) {
			close(leaderIn)
			<-proceed
			panic("boom")
		})
	}()
	<-leaderIn
	go func() {
		_, err := f.do(context.Background(), "k", func() (result, error) { return result{}, nil })
		followerErr <- err
	}()
	waitForWaiters(t, &f, "k", 1)
	close(proceed)
	if err := <-followerErr; !errors.Is(err, errFlightPanicked) {
		t.Errorf("follower of a panicking call = %v, want errFlightPanicked", err)
	}
	r, err := f.do(context.Background(), "k", func() (result, error) { return result{version: 3}, nil })
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
