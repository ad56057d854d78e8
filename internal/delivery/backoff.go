package delivery

import (
	"math/rand/v2"
	"time"
)

// backoff is the wait before attempt n+1 after n failed attempts: least
// doubled per attempt up to most, then a uniformly random part of that
// ("full jitter"), so that the receivers that failed together do not
// come back together.
func backoff(n int, least, most time.Duration) time.Duration {
	d := most
	if n >= 1 && n < 40 {
		if grown := least << (n - 1); grown > 0 && grown < most {
			d = grown
		}
	}
	if d <= 0 {
		return time.Millisecond
	}
	return time.Millisecond + time.Duration(rand.Int64N(int64(d)))
}
