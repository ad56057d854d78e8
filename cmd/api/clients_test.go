package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// debianPython is the interpreter Debian's python3-qgis and
// python3-owslib install for; a python3 earlier on PATH (a virtualenv,
// pyenv) would not see them.
const debianPython = "/usr/bin/python3"

// pythonClient runs the script testdata/name with args and decodes the
// JSON object it prints into out. The clients are part of what make test
// installs, so a missing one fails the test.
func pythonClient(t *testing.T, out any, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(debianPython, append([]string{filepath.Join("testdata", name)}, args...)...)
	cmd.Env = append(cmd.Environ(), "QT_QPA_PLATFORM=offscreen", "QGIS_AUTH_DB_DIR_PATH="+t.TempDir(),
		"XDG_RUNTIME_DIR="+t.TempDir(), "HOME="+t.TempDir())
	stdout, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		t.Fatalf("%s printed %q: %v", name, stdout, err)
	}
}

// clientService starts the service on the demo data with a key of every
// scope, anonymous callers refused so that every answer proves the key
// went along, and returns its URL (through the contract proxy), the key
// id and secret, and its logs.
func clientService(t *testing.T) (base, id, secret string, logs *syncBuffer, count func(where string) int) {
	t.Helper()
	pool, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none",
		"RATELIMIT_FEATURES": "100000/1s", "RATELIMIT_TILES": "100000/1s"}
	id = "client-" + testenv.Prefix(t)
	secret = runCLI(t, env, "keys", "create", "--name", id, "--scopes", "all")
	base, logs = startService(t, env)
	count = func(where string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM places WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return base, id, secret, logs, count
}

// TestQGISReadsAndRenders drives stock QGIS headless: with the key as a
// Basic authentication configuration it opens places through OGC API
// Features and reads exactly SQL's features, paging by 1,000 as the
// document's limit parameter tells it; then it loads the vector tiles,
// styles them with geogate's style and renders a map that is not blank.
func TestQGISReadsAndRenders(t *testing.T) {
	base, id, secret, logs, count := clientService(t)
	var got struct {
		OAPIF struct {
			Valid    bool
			Features int
		}
		Tiles struct{ Pixels, Drawn int }
	}
	pythonClient(t, &got, "qgis_client.py", base, id, secret, artifactDir(t))
	if want := count("true"); got.OAPIF.Features != want {
		t.Errorf("QGIS read %d features of places, SQL counts %d", got.OAPIF.Features, want)
	}
	if !strings.Contains(logs.String(), "limit=1000") {
		t.Errorf("QGIS never asked for pages of 1000: it did not find the page size in the document")
	}
	if got.Tiles.Drawn == 0 || got.Tiles.Drawn == got.Tiles.Pixels {
		t.Errorf("QGIS rendered %d of %d pixels from the tiles: the map is blank", got.Tiles.Drawn, got.Tiles.Pixels)
	}
	if strings.Contains(logs.String(), `"status":401`) {
		t.Errorf("a QGIS request went without the key (401 in the logs)")
	}
}

// TestOWSLibReadsACollection: OWSLib's OGC API Features client, with the
// key as Basic credentials (auth=), reads a box of places page by page,
// exactly SQL's features.
func TestOWSLibReadsACollection(t *testing.T) {
	base, id, secret, _, count := clientService(t)
	var got struct {
		ID       string
		Features int
	}
	pythonClient(t, &got, "owslib_client.py", base, id, secret, "places", "13,52.3,13.8,52.7")
	want := count("ST_Intersects(geom, ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326))")
	if got.ID != "places" || got.Features != want || want == 0 {
		t.Errorf("OWSLib read collection %q with %d features, SQL selects %d of places", got.ID, got.Features, want)
	}
}

// TestGDALWithBasicAuth: GDAL's own Basic authentication
// (GDAL_HTTP_AUTH=BASIC, GDAL_HTTP_USERPWD=id:secret) reads a box of
// places exactly.
func TestGDALWithBasicAuth(t *testing.T) {
	base, id, secret, _, count := clientService(t)
	out := gdal(t, "ogr2ogr", "-f", "GeoJSON", "/vsistdout/", "--config", "GDAL_HTTP_AUTH", "BASIC",
		"--config", "GDAL_HTTP_USERPWD", id+":"+secret, "-oo", "PAGE_SIZE=500",
		"OAPIF:"+base, "places", "-spat", "13", "52.3", "13.8", "52.7")
	var fc struct{ Features []json.RawMessage }
	if err := json.Unmarshal([]byte(out), &fc); err != nil {
		t.Fatalf("ogr2ogr output: %v\n%.300s", err, out)
	}
	if want := count("ST_Intersects(geom, ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326))"); len(fc.Features) != want {
		t.Errorf("GDAL with Basic credentials copied %d features, SQL selects %d", len(fc.Features), want)
	}
}
