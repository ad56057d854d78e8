package simulate

import (
	"math"
	"testing"
	"time"
)

func TestDeviceDrivesThereAndBack(t *testing.T) {
	r := route{name: "test", points: []point{{0, 0}, {1, 0}, {1, 1}}}
	d := device{id: "d", route: r}
	lap := time.Minute
	tests := []struct {
		elapsed time.Duration
		want    point
	}{
		{0, point{0, 0}},
		{lap / 2, point{1, 0}}, // the legs are (almost) equally long
		{lap, point{1, 1}},
		{lap + lap/2, point{1, 0}}, // on the way back
		{2 * lap, point{0, 0}},
	}
	for _, tt := range tests {
		got := d.where(tt.elapsed, lap)
		if math.Abs(got.lng-tt.want.lng) > 1e-3 || math.Abs(got.lat-tt.want.lat) > 1e-3 {
			t.Errorf("where(%v) = %v, want %v", tt.elapsed, got, tt.want)
		}
	}
}

func TestFleetSpreadsOverTheRoutes(t *testing.T) {
	f := fleet("sim", 7)
	if f[0].id != "sim-1" || f[6].id != "sim-7" {
		t.Errorf("ids %s ... %s, want sim-1 ... sim-7", f[0].id, f[6].id)
	}
	if f[5].route.name != routes[0].name || f[5].phase == f[0].phase {
		t.Errorf("the sixth device should take the first route again, elsewhere on it")
	}
}

func TestBearing(t *testing.T) {
	tests := []struct {
		to   point
		want float64
	}{{point{0, 1}, 0}, {point{1, 0}, 90}, {point{0, -1}, 180}, {point{-1, 0}, 270}}
	for _, tt := range tests {
		if got := bearing(point{0, 0}, tt.to); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("bearing to %v = %v, want %v", tt.to, got, tt.want)
		}
	}
}
