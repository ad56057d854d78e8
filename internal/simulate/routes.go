// Package simulate drives a small simulated fleet through geogate's HTTP
// API: devices move along routes that cross the demo countries' borders
// and report their positions every tick, so that a newcomer sees enter,
// exit and dwell events happen without writing a client.
package simulate

import (
	"math"
	"strconv"
	"time"

	"github.com/geogate/geogate/internal/spatial"
)

// point is a longitude and latitude in degrees.
type point struct{ lng, lat float64 }

// route is a named polyline a device drives back and forth.
type route struct {
	name   string
	points []point
}

// routes cross borders of the demo fences (the world's countries): each
// passes at least two of them, so a lap makes exits and enters.
var routes = []route{
	{"Strasbourg–Basel–Zürich (FRA, DEU, CHE)", []point{{7.75, 48.58}, {7.58, 48.1}, {7.59, 47.56}, {8.54, 47.37}}},
	{"Aachen–Maastricht–Liège (DEU, NLD, BEL)", []point{{6.08, 50.78}, {5.69, 50.85}, {5.57, 50.63}, {6.08, 50.78}}},
	{"Flensburg–Aabenraa–Kolding (DEU, DNK)", []point{{9.43, 54.78}, {9.42, 55.04}, {9.47, 55.49}}},
	{"Berlin–Szczecin (DEU, POL)", []point{{13.4, 52.5}, {14.2, 53.2}, {14.55, 53.43}}},
	{"Geneva–Chamonix–Aosta (CHE, FRA, ITA)", []point{{6.14, 46.2}, {6.87, 45.92}, {7.32, 45.74}}},
}

// metres between two points, on a sphere: exact enough for a speed and a
// route's length.
func metres(a, b point) float64 { return spatial.SphereMetres(a.lng, a.lat, b.lng, b.lat) }

// bearing from a to b, degrees clockwise from north in [0, 360).
func bearing(a, b point) float64 {
	φ1, φ2 := a.lat*math.Pi/180, b.lat*math.Pi/180
	dλ := (b.lng - a.lng) * math.Pi / 180
	y := math.Sin(dλ) * math.Cos(φ2)
	x := math.Cos(φ1)*math.Sin(φ2) - math.Sin(φ1)*math.Cos(φ2)*math.Cos(dλ)
	return math.Mod(math.Atan2(y, x)*180/math.Pi+360, 360)
}

// length is the route's length in metres.
func (r route) length() float64 {
	var n float64
	for i := 1; i < len(r.points); i++ {
		n += metres(r.points[i-1], r.points[i])
	}
	return n
}

// at is the point a fraction f (0 to 1) of the way along the route.
func (r route) at(f float64) point {
	want := math.Max(0, math.Min(1, f)) * r.length()
	for i := 1; i < len(r.points); i++ {
		a, b := r.points[i-1], r.points[i]
		seg := metres(a, b)
		if want <= seg || i == len(r.points)-1 {
			t := 0.0
			if seg > 0 {
				t = math.Min(1, want/seg)
			}
			return point{a.lng + t*(b.lng-a.lng), a.lat + t*(b.lat-a.lat)}
		}
		want -= seg
	}
	return r.points[len(r.points)-1]
}

// device is one simulated device: a route, driven there and back in lap
// each way, starting phase laps in.
type device struct {
	id    string
	route route
	phase float64
}

// where is the device's point at elapsed time into the simulation.
func (d device) where(elapsed, lap time.Duration) point {
	p := math.Mod(d.phase+elapsed.Seconds()/lap.Seconds(), 2)
	if p > 1 {
		p = 2 - p // the way back
	}
	return d.route.at(p)
}

// fleet is n devices named prefix-1 to prefix-n, over the routes in turn,
// spread along them.
func fleet(prefix string, n int) []device {
	out := make([]device, n)
	for i := range out {
		out[i] = device{
			id:    prefix + "-" + strconv.Itoa(i+1),
			route: routes[i%len(routes)],
			phase: float64(i) / float64(n) * 0.5,
		}
	}
	return out
}
