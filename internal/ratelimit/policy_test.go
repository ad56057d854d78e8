package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseWindows(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []Window
		wantErr string
	}{
		{in: "10/1s", want: []Window{{Limit: 10, Period: time.Second}}},
		{in: "600/1m, 10/1s", want: []Window{{Limit: 10, Period: time.Second}, {Limit: 600, Period: time.Minute}}},
		{in: "5/s,100/h,1000/d", want: []Window{{Limit: 5, Period: time.Second}, {Limit: 100, Period: time.Hour}, {Limit: 1000, Period: 24 * time.Hour}}},
		{in: "10/90s", want: []Window{{Limit: 10, Period: 90 * time.Second}}},
		{in: "", wantErr: "no windows"},
		{in: "10", wantErr: "want LIMIT/PERIOD"},
		{in: "0/1s", wantErr: "at least 1"},
		{in: "x/1s", wantErr: "whole number"},
		{in: "10/500ms", wantErr: "whole number of seconds"},
		{in: "10/1s,20/1s", wantErr: "two windows of 1s"},
		{in: "10/8d", wantErr: "at most 7d"},
		{in: "10/fortnight", wantErr: "want a duration"},
		{in: "5000ms/1m, 500ms/1s", want: []Window{{Limit: 500, Period: time.Second, Unit: DBTime}, {Limit: 5000, Period: time.Minute, Unit: DBTime}}},
		{in: "100000ms/1d@calendar", want: []Window{{Limit: 100000, Period: 24 * time.Hour, Calendar: Day, Unit: DBTime}}},
		{in: "10/1s,5000ms/1m", wantErr: "counts one unit"},
		{in: "ms/1s", wantErr: "whole number"},
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
	}
}
