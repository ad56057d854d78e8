package ratelimit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseWindows: any input either fails with an error or parses into
// sorted, distinct, valid windows whose printed form parses back the same.
func FuzzParseWindows(f *testing.F) {
	for _, s := range []string{"10/1s", "10/1s,600/1m", "5/s, 100/h,1000/d", "1/90s", "x", "10/0s", "3/1h30m", ",,", "9999999999999999999/1s", "10/1s,100000/1d@calendar", "3/mo@calendar,5/7d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ws, err := ParseWindows(s)
		if err != nil {
			return
		}
		parts := make([]string, len(ws))
		for i, w := range ws {
			if w.Limit < 1 || w.Period <= 0 || (i > 0 && ws[i-1].Period >= w.Period) {
				t.Fatalf("ParseWindows(%q) = %v: not sorted, distinct and positive", s, ws)
			}
			parts[i] = w.String()
		}
		again, err := ParseWindows(strings.Join(parts, ","))
		if err != nil || !cmp.Equal(ws, again) {
			t.Fatalf("ParseWindows(%q) = %v, printed %q parses to %v, %v", s, ws, strings.Join(parts, ","), again, err)
		}
	})
}
