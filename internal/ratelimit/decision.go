package ratelimit

import (
	"fmt"
	"strconv"
	"time"
)

// Decision is the verdict on one request and the state of each window of
// its policy after it.
type Decision struct {
	Policy string
	// Allowed says the request may proceed. It is true for a rejection in
	// shadow mode; Limited tells those apart.
	Allowed bool
	// Limited says the request did not fit the limits.
	Limited bool
	// Impossible says the cost exceeds some window's whole limit, so the
	// request can never be admitted, however long the client waits.
	Impossible bool
	Cost       int
	// Windows is empty when Redis was unavailable and the policy failed
	// open: nothing was counted.
	Windows []WindowState
	// RetryAfter, for a Limited and not Impossible request, is when the
	// same request would fit if nothing else is admitted meanwhile.
	RetryAfter time.Duration
	// Backend is BackendRedis, BackendLocal or BackendNone.
	Backend string
	// res is what an admitted decision charged, for Settle.
	res *reservation
}

// WindowState is one window after a decision.
type WindowState struct {
	// Window is the policy's window; for a calendar quota, Period is the
	// length of the current period (a day of 23 or 25 hours where clocks
	// change, a month of 28 to 31 days).
	Window
	// Name identifies the window in headers: the policy name for the first
	// (shortest) window, "<policy>-<period>" for the others, such as
	// "geofence-1m" or "geofence-1d@calendar".
	Name      string
	Used      int
	Remaining int
	// Reset is when the window's count next drops: its oldest unit leaves
	// (exact log), the current fixed bucket ends (counter), or the
	// calendar period ends (a calendar quota, which then starts afresh).
	Reset time.Duration
	// Ends is when a calendar quota's current period ends; zero for a
	// sliding window.
	Ends time.Time
	// Exceeded marks the windows that refused the request.
	Exceeded bool
}

func (w WindowState) String() string {
	return fmt.Sprintf("%s %s: %d used, %d left, reset %v", w.Name, w.Window, w.Used, w.Remaining, w.Reset)
}

func windowName(policy string, i int, w Window) string {
	if i == 0 {
		return policy
	}
	return policy + "-" + w.period()
}

func newDecision(p *compiled, set *windowSet, cost int, o outcome, backend string) Decision {
	ws := set.ws
	d := Decision{Policy: p.Name, Allowed: o.admitted, Limited: !o.admitted, Cost: cost, Backend: backend}
	if len(o.windows) != len(ws) {
		return d
	}
	d.Windows = make([]WindowState, len(ws))
	for i, w := range ws {
		wo := o.windows[i]
		st := WindowState{
			Window:    w,
			Name:      set.names[i],
			Used:      int(wo.used),
			Remaining: max(0, w.Limit-int(wo.used)),
			Reset:     time.Duration(max(0, wo.reset)) * time.Microsecond,
		}
		if w.Calendar != "" && wo.end > wo.start {
			st.Period = time.Duration(wo.end-wo.start) * time.Microsecond
			st.Ends = time.UnixMicro(wo.end).In(set.loc)
		}
		if !o.admitted && st.Remaining < cost {
			st.Exceeded = true
			if cost > w.Limit {
				d.Impossible = true
			}
			d.RetryAfter = max(d.RetryAfter, time.Duration(wo.retry)*time.Microsecond)
		}
		d.Windows[i] = st
	}
	if d.Impossible {
		d.RetryAfter = 0
	}
	return d
}

// tightest returns the window closest to exhaustion: the fewest remaining,
// then the latest reset.
func (d Decision) tightest() (WindowState, bool) {
	if len(d.Windows) == 0 {
		return WindowState{}, false
	}
	best := d.Windows[0]
	for _, w := range d.Windows[1:] {
		if w.Remaining < best.Remaining || (w.Remaining == best.Remaining && w.Reset > best.Reset) {
			best = w
		}
	}
	return best, true
}

// RetryAfterSeconds is the Retry-After value: RetryAfter rounded up to
// whole seconds, at least 1.
func (d Decision) RetryAfterSeconds() int64 {
	return max(1, ceilSeconds(d.RetryAfter))
}

// Violated lists the names of the windows that refused the request.
func (d Decision) Violated() []string {
	var out []string
	for _, w := range d.Windows {
		if w.Exceeded {
			out = append(out, w.Name)
		}
	}
	if len(out) == 0 {
		out = []string{d.Policy}
	}
	return out
}

func secs(d time.Duration) string { return strconv.FormatInt(ceilSeconds(d), 10) }
