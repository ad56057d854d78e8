package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCalendarWindows(t *testing.T) {
	day, month := CalendarWindow(100000, Day), CalendarWindow(3, Month)
	for _, tc := range []struct {
		in      string
		want    []Window
		printed string
		wantErr string
	}{
		{in: "10/1s,100000/1d@calendar", want: []Window{{Limit: 10, Period: time.Second}, day}, printed: "10/1s,100000/1d@calendar"},
		{in: "3/mo@calendar, 100000/d@calendar,10/1s", want: []Window{{Limit: 10, Period: time.Second}, day, month}, printed: "10/1s,100000/1d@calendar,3/1mo@calendar"},
		{in: "3/1mo@calendar,5/7d", want: []Window{{Limit: 5, Period: 7 * 24 * time.Hour}, month}, printed: "5/7d,3/1mo@calendar"},
		{in: "5/1h, 7/1d@calendar", want: []Window{{Limit: 5, Period: time.Hour}, CalendarWindow(7, Day)}, printed: "5/1h,7/1d@calendar"},
		{in: "1/2d@calendar", wantErr: "want 1d@calendar or 1mo@calendar"},
		{in: "1/1w@calendar", wantErr: "want 1d@calendar or 1mo@calendar"},
		{in: "1/@calendar", wantErr: "want 1d@calendar or 1mo@calendar"},
		{in: "0/1d@calendar", wantErr: "at least 1"},
		{in: "1/1d,2/1d@calendar", wantErr: "a sliding window of 1d and a calendar day"},
		{in: "1/1d@calendar,2/d@calendar", wantErr: "two windows of 1d@calendar"},
		{in: "1/1mo", wantErr: "want a duration"},
	} {
		got, err := ParseWindows(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseWindows(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseWindows(%q) error = %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseWindows(%q) (-want +got):\n%s", tc.in, diff)
		}
		var parts []string
		for _, w := range got {
			parts = append(parts, w.String())
		}
		if printed := strings.Join(parts, ","); printed != tc.printed {
			t.Errorf("ParseWindows(%q) prints as %q, want %q", tc.in, printed, tc.printed)
		}
	}
}

func TestValidateCalendarWindows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       Policy
		wantErr string
	}{
		{"LogBeyondItsCapIsFineForAQuota", NewPolicy("p", Window{Limit: 10, Period: time.Second}, CalendarWindow(5_000_000, Day)), ""},
		{"Counter", Policy{Name: "p", Algorithm: Counter, Failure: FailLocal, Windows: []Window{{Limit: 10, Period: time.Second}, CalendarWindow(5_000_000, Month)}}, ""},
		{"QuotaOnly", NewPolicy("p", CalendarWindow(5, Month)), ""},
		{"TooLarge", NewPolicy("p", CalendarWindow(maxQuotaLimit+1, Day)), "a calendar quota allows at most"},
		{"TwoDays", NewPolicy("p", CalendarWindow(5, Day), CalendarWindow(6, Day)), "two windows of 1d@calendar"},
		{"UnknownCalendar", NewPolicy("p", Window{Limit: 5, Period: time.Hour, Calendar: "week"}), `calendar "week"`},
		{"ZeroLimit", NewPolicy("p", CalendarWindow(0, Day)), "at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func mustLocation(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestPeriod(t *testing.T) {
	berlin := mustLocation(t, "Europe/Berlin")
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		c               Calendar
		loc             *time.Location
		at              string
		start, end, lab string
	}{
		{Day, time.UTC, "2026-03-10T23:59:59.999999Z", "2026-03-10T00:00:00Z", "2026-03-11T00:00:00Z", "2026-03-10"},
		{Day, time.UTC, "2026-03-11T00:00:00Z", "2026-03-11T00:00:00Z", "2026-03-12T00:00:00Z", "2026-03-11"},
		{Month, time.UTC, "2026-12-31T23:59:59Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-12"},
		{Month, time.UTC, "2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", "2028-02"},
		// Berlin's midnight is 23:00 UTC in winter, 22:00 in summer; the
		// day the clocks go forward has 23 hours.
		{Day, berlin, "2026-01-15T22:59:59Z", "2026-01-14T23:00:00Z", "2026-01-15T23:00:00Z", "2026-01-15"},
		{Day, berlin, "2026-01-15T23:00:00Z", "2026-01-15T23:00:00Z", "2026-01-16T23:00:00Z", "2026-01-16"},
		{Day, berlin, "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", "2026-03-29"},
		{Month, berlin, "2026-03-31T22:30:00Z", "2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z", "2026-04"},
	} {
		start, end, label := period(tc.c, tc.loc, utc(tc.at))
		if !start.Equal(utc(tc.start)) || !end.Equal(utc(tc.end)) || label != tc.lab {
			t.Errorf("period(%s, %s, %s) = %s, %s, %q; want %s, %s, %q", tc.c, tc.loc, tc.at,
				start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), label, tc.start, tc.end, tc.lab)
		}
	}
}

// TestQuotaKeySharesTheSlot: a quota's counter lands in the slot of the
// identity's sliding-window key whatever the identity holds, braces
// included, and keeps the plain key as its tag where it can.
func TestQuotaKeySharesTheSlot(t *testing.T) {
	if got, want := quotaKey("rl:geofence:key:demo", Day, "2026-03-10"), "{rl:geofence:key:demo}:day:2026-03-10"; got != want {
		t.Errorf("quotaKey = %q, want %q", got, want)
	}
	if got, want := crc16("123456789"), uint16(0x31C3); got != want {
		t.Errorf("crc16(123456789) = %#x, want %#x (CRC-16/XMODEM)", got, want)
	}
	for _, key := range []string{
		"rl:geofence:key:demo", "rlc:tiles-cached:ip:10.0.0.1", "rl:p:a{b", "rl:p:{x}y", "rl:p:{}z",
		"rl:p:a}b", "rl:p:}{", "rl:p:{{}}", "rl:p:a{}b}c", "rl:p:{a}{b}", "rl:p:" + strings.Repeat("}", 20),
	} {
		for _, c := range []Calendar{Day, Month} {
			q := quotaKey(key, c, "2026-03")
			if keySlot(q) != keySlot(key) {
				t.Errorf("quotaKey(%q) = %q: slot %d, want the key's %d", key, q, keySlot(q), keySlot(key))
			}
			if !strings.Contains(q, key) {
				t.Errorf("quotaKey(%q) = %q does not name the key", key, q)
			}
		}
	}
}
