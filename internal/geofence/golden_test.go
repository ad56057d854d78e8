package geofence

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestGoldenShapes pins the JSON of each kind of answer, success and
// error, to files under testdata/golden (refresh with -update).
func TestGoldenShapes(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	insertPlaces(t, pool, []place{{"Alpha", 10, 10}, {"Beta", 10.001, 10}, {"Gamma", 10.002, 10.001}})
	mustExec(t, pool, `INSERT INTO geofences (name, properties, geom)
		VALUES ('Square', '{"zone":"A"}', ST_Multi(ST_MakeEnvelope(9.99, 9.99, 10.01, 10.01, 4326)))`)
	tests := []struct {
		name, method, path, body string
		wantCode                 int
	}{
		{"within", "GET", "/within?lng=10&lat=10&radius=500&limit=2", "", 200},
		{"within-last-page", "GET", "/within?lng=10&lat=10&radius=150&properties=none", "", 200},
		{"within-invalid", "GET", "/within?lng=200&lat=x&radius=0", "", 422},
		{"fence", "GET", "/geofences/1", "", 200},
		{"fence-list", "GET", "/geofences?bbox=9,9,11,11", "", 200},
		{"fence-not-found", "GET", "/geofences/99", "", 404},
		{"fence-invalid", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}`), 422},
		{"fence-unclosed", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}`), 422},
		{"contains", "GET", "/geofences/contains?lng=10&lat=10", "", 200},
		{"contains-batch", "POST", "/geofences/contains", `{"points":[[10,10],[0,0]]}`, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, h, tt.method, tt.path, tt.body)
			if code != tt.wantCode {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, code, body, tt.wantCode)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				t.Fatalf("body %s is not JSON: %v", body, err)
			}
			pretty.WriteByte('\n')
			file := filepath.Join("testdata", "golden", tt.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("%s %s =\n%s\nwant (%s)\n%s", tt.method, tt.path, pretty.Bytes(), file, want)
			}
		})
	}
}
