package ratelimit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Window is one limit of a policy: at most Limit units within any interval
// of length Period (a sliding window), or, when Calendar is set, at most
// Limit units within each calendar day or month (a calendar quota).
type Window struct {
	Limit  int
	Period time.Duration
	// Unit is what the window counts: requests' costs (the empty Unit,
	// written "10/1s") or milliseconds of database time (DBTime, written
	// "5000ms/1m"). Every window of a policy counts the same unit.
	Unit Unit
	// Calendar, when set, makes the window a quota per calendar period,
	// which resets at the period's start (midnight, or the first of the
	// month, in the policy's Location). Period is then only the period's
	// nominal length (24h for a day, 30 days for a month), for ordering;
	// decisions use the real one.
	Calendar Calendar
}

func (w Window) String() string { return strconv.Itoa(w.Limit) + string(w.Unit) + "/" + w.period() }

// Unit is what a window counts.
type Unit string

const (
	// Requests counts what each request costs by its route's rule.
	Requests Unit = ""
	// DBTime counts milliseconds of PostgreSQL time, measured after each
	// request and settled against what it reserved. A policy of database
	// time always counts with the Counter algorithm: a log would hold one
	// member per millisecond (a request of a minute, 60,000 of them),
	// where a counter holds a few fields per window whatever it counts.
	DBTime Unit = "ms"
)

// Unit is what the policy's windows count.
func (p Policy) Unit() Unit {
	if len(p.Windows) == 0 {
		return Requests
	}
	return p.Windows[0].Unit
}

// period is how the window's period is written: "1s", "1m", ..., or
// "1d@calendar" and "1mo@calendar".
func (w Window) period() string {
	switch w.Calendar {
	case Day:
		return "1d@calendar"
	case Month:
		return "1mo@calendar"
	}
	return formatPeriod(w.Period)
}

// Calendar is the period of a calendar quota.
type Calendar string

const (
	// Day resets at midnight.
	Day Calendar = "day"
	// Month resets at midnight on the first of the month.
	Month Calendar = "month"
)

// CalendarWindow returns the quota of limit units per calendar period c.
func CalendarWindow(limit int, c Calendar) Window {
	w := Window{Limit: limit, Period: 24 * time.Hour, Calendar: c}
	if c == Month {
		w.Period = 30 * 24 * time.Hour
	}
	return w
}

// Algorithm selects how a policy counts.
type Algorithm string

const (
	// Log is the exact sliding-window log: one sorted-set member per unit.
	Log Algorithm = "log"
	// Counter is the sliding-window counter approximation: two fixed
	// buckets per window weighted by their overlap, O(1) memory per key.
	Counter Algorithm = "counter"
)

// FailureMode says what a policy does when Redis cannot decide.
type FailureMode string

const (
	// FailLocal hands decisions to the in-process limiter of each replica.
	FailLocal FailureMode = "local"
	// FailOpen admits every request, counted in metrics and logged.
	FailOpen FailureMode = "open"
	// FailClosed refuses every request with 503.
	FailClosed FailureMode = "closed"
)

// Policy is a named set of windows checked together and consumed
// all-or-nothing, with per-tier and per-identity overrides.
type Policy struct {
	Name      string
	Windows   []Window
	Algorithm Algorithm
	Failure   FailureMode
	// Shadow decides and counts but admits every request.
	Shadow bool
	// Concurrency caps the requests of one identity in flight at once; 0
	// means no cap. A slot not released within Lease frees itself.
	Concurrency int
	Lease       time.Duration
	// Tiers and Identities replace Windows for a tier name or an identity
	// (the identity wins over the tier).
	Tiers      map[string][]Window
	Identities map[string][]Window
	// Location is the time zone whose midnights bound the calendar
	// quotas; nil is UTC.
	Location *time.Location
}

// windowSet is a window list with what every decision needs computed
// once: the windows' header names and their script arguments. The scripts
// take the sliding windows first and the calendar quotas after them, each
// in the list's order; sliding and calendar say where each of those is in
// ws.
type windowSet struct {
	ws      []Window
	names   []string
	tail    []any // limit, period in microseconds, per sliding window
	sliding []int
	cal     []int
	slide   []Window       // the sliding windows, in order
	loc     *time.Location // of the calendar quotas
	// periods caches, per calendar quota, the period of the last decision.
	periods []atomic.Pointer[cachedPeriod]
}

func newWindowSet(policy string, ws []Window) *windowSet { return newWindowSetIn(policy, ws, nil) }

// newWindowSetIn is newWindowSet with calendar quotas in loc (nil: UTC).
func newWindowSetIn(policy string, ws []Window, loc *time.Location) *windowSet {
	if loc == nil {
		loc = time.UTC
	}
	s := &windowSet{ws: ws, names: make([]string, len(ws)), loc: loc}
	for i, w := range ws {
		s.names[i] = windowName(policy, i, w)
		if w.Calendar != "" {
			s.cal = append(s.cal, i)
			continue
		}
		s.sliding = append(s.sliding, i)
		s.slide = append(s.slide, w)
		s.tail = append(s.tail, strconv.Itoa(w.Limit), strconv.FormatInt(w.Period.Microseconds(), 10))
	}
	s.periods = make([]atomic.Pointer[cachedPeriod], len(s.cal))
	return s
}

// longest returns the longest period of the sliding windows (0: none).
func (s *windowSet) longest() time.Duration {
	var m time.Duration
	for _, i := range s.sliding {
		m = max(m, s.ws[i].Period)
	}
	return m
}

// compiled is a policy ready for decisions.
type compiled struct {
	Policy
	base  *windowSet
	tiers map[string]*windowSet
	ids   map[string]*windowSet
	dec   [2][3]prometheus.Counter // decisions by outcome (allowed, rejected) and backend
}

func compile(p Policy) *compiled {
	c := &compiled{Policy: p, base: newWindowSetIn(p.Name, p.Windows, p.Location), tiers: map[string]*windowSet{}, ids: map[string]*windowSet{}}
	for k, ws := range p.Tiers {
		c.tiers[k] = newWindowSetIn(p.Name, ws, p.Location)
	}
	for k, ws := range p.Identities {
		c.ids[k] = newWindowSetIn(p.Name, ws, p.Location)
	}
	return c
}

// key is the Redis key of identity's windows under the policy.
func (c *compiled) key(identity string) string {
	if c.Algorithm == Counter {
		return counterKey(c.Name, identity)
	}
	return logKey(c.Name, identity)
}

// windowsFor returns the windows that apply to identity in tier.
func (c *compiled) windowsFor(tier, identity string) *windowSet {
	if len(c.ids) > 0 {
		if w, ok := c.ids[identity]; ok {
			return w
		}
	}
	if len(c.tiers) > 0 {
		if w, ok := c.tiers[tier]; ok {
			return w
		}
	}
	return c.base
}

// Limits of what a policy may ask for: a log holds one member per unit, so
// its limit bounds the work and memory of one script run; counter
// arithmetic (three terms of limit times period in milliseconds) stays
// exact in a double below 2^53, and so does a calendar quota's count.
const (
	maxLogLimit    = 100_000
	maxCounterProd = 1 << 51
	maxQuotaLimit  = 1_000_000_000_000
	maxWindows     = 8
)

var policyName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// NewPolicy returns a policy with the defaults every policy starts from:
// the exact log, the local failure mode and a 30s concurrency lease.
func NewPolicy(name string, ws ...Window) Policy {
	p := Policy{Name: name, Windows: ws, Algorithm: Log, Failure: FailLocal, Lease: 30 * time.Second}
	return p.counted()
}

// counted is p with the algorithm its unit calls for: a policy of
// database time counts with Counter (see DBTime), whatever it named.
func (p Policy) counted() Policy {
	if p.Unit() == DBTime {
		p.Algorithm = Counter
	}
	return p
}

// ParseWindows parses a comma-separated list such as "10/1s,600/1m".
// Periods are Go durations in whole seconds, or a bare unit (s, m, h, d),
// with "d" meaning 24h; "1d@calendar" and "1mo@calendar" are quotas per
// calendar day and month. The windows come sorted by period, the calendar
// day after sliding windows of up to a day, the month last.
func ParseWindows(s string) ([]Window, error) {
	var ws []Window
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lim, per, ok := strings.Cut(part, "/")
		if !ok {
			return nil, fmt.Errorf("window %q: want LIMIT/PERIOD such as 10/1s", part)
		}
		lim, ms := strings.CutSuffix(strings.TrimSpace(lim), string(DBTime))
		n, err := strconv.Atoi(lim)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("window %q: limit must be a whole number of at least 1, or of milliseconds of database time such as 5000ms", part)
		}
		unit := Requests
		if ms {
			unit = DBTime
		}
		if len(ws) > 0 && ws[0].Unit != unit {
			return nil, fmt.Errorf("window %q: every window of a policy counts one unit: requests (10/1s) or database time (5000ms/1m)", part)
		}
		per = strings.TrimSpace(per)
		if p, ok := strings.CutSuffix(per, "@calendar"); ok {
			c, err := parseCalendar(strings.TrimSpace(p))
			if err != nil {
				return nil, fmt.Errorf("window %q: %v", part, err)
			}
			w := CalendarWindow(n, c)
			w.Unit = unit
			ws = append(ws, w)
			continue
		}
		d, err := parsePeriod(per)
		if err != nil {
			return nil, fmt.Errorf("window %q: %v", part, err)
		}
		ws = append(ws, Window{Limit: n, Period: d, Unit: unit})
	}
	if len(ws) == 0 {
		return nil, errors.New("no windows: want LIMIT/PERIOD[,LIMIT/PERIOD...] such as 10/1s,600/1m")
	}
	slices.SortStableFunc(ws, func(a, b Window) int { return cmp.Compare(a.Period, b.Period) })
	for i := 1; i < len(ws); i++ {
		if ws[i].Period == ws[i-1].Period {
			if ws[i].Calendar != ws[i-1].Calendar {
				return nil, errors.New("a sliding window of 1d and a calendar day: keep one of them")
			}
			return nil, fmt.Errorf("two windows of %s", ws[i].period())
		}
	}
	if len(ws) > maxWindows {
		return nil, fmt.Errorf("%d windows: at most %d", len(ws), maxWindows)
	}
	return ws, nil
}

func parseCalendar(s string) (Calendar, error) {
	switch s {
	case "1d", "d":
		return Day, nil
	case "1mo", "mo":
		return Month, nil
	}
	return "", fmt.Errorf("calendar period %q: want 1d@calendar or 1mo@calendar", s)
}

func parsePeriod(s string) (time.Duration, error) {
	switch s {
	case "s", "m", "h", "d":
		s = "1" + s
	}
	bad := fmt.Errorf("period %q: want a duration such as 1s, 1m, 1h or 1d", s)
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		k, err := strconv.Atoi(n)
		if err != nil || k < 1 || k > 1000 {
			return 0, bad
		}
		d = time.Duration(k) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return 0, bad
		}
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("period %q: must be a whole number of seconds", s)
	}
	if d > 7*24*time.Hour {
		return 0, fmt.Errorf("period %q: at most 7d", s)
	}
	return d, nil
}

func formatPeriod(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return strconv.Itoa(int(d/time.Second)) + "s"
}

// Validate checks a policy's algorithm, failure mode and every window set.
func (p *Policy) Validate() error {
	if !policyName.MatchString(p.Name) || p.Name == "config" {
		return fmt.Errorf("policy name %q: want lower-case letters, digits and '-', starting with a letter (and not \"config\")", p.Name)
	}
	switch p.Algorithm {
	case Log, Counter:
	default:
		return fmt.Errorf("policy %s: algorithm %q: want log or counter", p.Name, p.Algorithm)
	}
	switch p.Failure {
	case FailLocal, FailOpen, FailClosed:
	default:
		return fmt.Errorf("policy %s: failure %q: want local, open or closed", p.Name, p.Failure)
	}
	if p.Concurrency < 0 {
		return fmt.Errorf("policy %s: concurrency %d: must be 0 (none) or more", p.Name, p.Concurrency)
	}
	if p.Concurrency > 0 && p.Lease < time.Second {
		return fmt.Errorf("policy %s: lease %s: must be at least 1s", p.Name, p.Lease)
	}
	check := func(what string, ws []Window) error {
		if len(ws) == 0 {
			return fmt.Errorf("policy %s: %s: no windows", p.Name, what)
		}
		cals := map[Calendar]bool{}
		for _, w := range ws {
			if w.Unit != p.Unit() {
				return fmt.Errorf("policy %s: %s: window %s counts another unit than the policy's %s", p.Name, what, w, p.Windows[0])
			}
			if w.Limit < 1 {
				return fmt.Errorf("policy %s: %s: window %s: the limit must be at least 1", p.Name, what, w)
			}
			if w.Calendar != "" {
				switch {
				case w.Calendar != Day && w.Calendar != Month:
					return fmt.Errorf("policy %s: %s: calendar %q: want day or month", p.Name, what, w.Calendar)
				case cals[w.Calendar]:
					return fmt.Errorf("policy %s: %s: two windows of %s", p.Name, what, w.period())
				case w.Limit > maxQuotaLimit:
					return fmt.Errorf("policy %s: %s: window %s: a calendar quota allows at most %d", p.Name, what, w, maxQuotaLimit)
				}
				cals[w.Calendar] = true
				continue
			}
			if w.Period <= 0 {
				return fmt.Errorf("policy %s: %s: window %s: the period must be positive", p.Name, what, w)
			}
			if p.Algorithm == Log && w.Limit > maxLogLimit {
				return fmt.Errorf("policy %s: %s: window %s: the exact log allows at most %d per window; use algorithm: counter", p.Name, what, w, maxLogLimit)
			}
			if p.Algorithm == Counter && float64(w.Limit)*float64(w.Period.Milliseconds()) >= maxCounterProd {
				return fmt.Errorf("policy %s: %s: window %s: limit times period is too large", p.Name, what, w)
			}
		}
		return nil
	}
	if err := check("windows", p.Windows); err != nil {
		return err
	}
	for t, ws := range p.Tiers {
		if err := check("tier "+t, ws); err != nil {
			return err
		}
	}
	for id, ws := range p.Identities {
		if err := check("identity "+id, ws); err != nil {
			return err
		}
	}
	return nil
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}
