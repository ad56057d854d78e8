package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/geogate/geogate/internal/ratelimit"
)

func ExampleLimiter_Allow() {
	// nil Redis: decisions in process, as in a single-instance deployment.
	// With a Redis client the calls and results are the same.
	l, err := ratelimit.New(nil, map[string]ratelimit.Policy{
		"geofence": {Windows: []ratelimit.Window{{Limit: 2, Period: time.Second}}, Algorithm: ratelimit.Log, Failure: ratelimit.FailLocal},
	}, ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := l.Allow(context.Background(), "geofence", "key:demo", 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Windows[0].Remaining, d.Limited && d.RetryAfterSeconds() == 1)
	}
	d, _ := l.Allow(context.Background(), "geofence", "key:demo", 3)
	fmt.Println(d.Impossible)
	// Output:
	// true 1 false
	// true 0 false
	// false 0 true
	// true
}
