package geofence

import "testing"

func TestRadiusCost(t *testing.T) {
	for _, tc := range []struct {
		m    float64
		want int
	}{{-5, 1}, {0, 1}, {500, 1}, {1000, 1}, {1001, 2}, {2000, 2}, {2001, 3}, {4000, 3}, {8000, 4}, {16000, 5}, {50000, 7}, {64000, 7}, {64001, 8}, {1e9, 8}} {
		if got := RadiusCost(tc.m); got != tc.want {
			t.Errorf("RadiusCost(%v) = %d, want %d", tc.m, got, tc.want)
		}
	}
}
