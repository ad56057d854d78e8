package main

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// send makes a request with a body and headers as the caller whose
// credentials are cred (an API key, or "Bearer <token>"; "" for none).
func send(t *testing.T, method, url, cred, body string, headers ...string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if strings.HasPrefix(cred, "Bearer ") {
		req.Header.Set("Authorization", cred)
	} else if cred != "" {
		req.Header.Set("x-api-key", cred)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/geo+json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// TestWritesPart4 walks OGC API Features Part 4 on a table under
// row-level security, as one tenant's key: create, a stale If-Match,
// replace, merge patch, two writers racing on one version, delete; and
// what must be refused: another tenant's row (the policy's WITH CHECK),
// a property that is no column, SQL in a name or a value, a geometry the
// column does not hold, a collection not open for writing, a key
// without the write scope. Each write retires the layer's cached tiles.
// Then GDAL, OWSLib and QGIS read back what the writes left.
func TestWritesPart4(t *testing.T) {
	base, env, _ := tenantService(t)
	id := "w-" + testenv.Prefix(t)
	ka := runCLI(t, env, "keys", "create", "--name", id+"-a", "--scopes", "all", "--db-role", "gg_tenant", "--claims", `{"tenant":"a"}`)
	kb := runCLI(t, env, "keys", "create", "--name", id+"-b", "--scopes", "all", "--db-role", "gg_tenant", "--claims", `{"tenant":"b"}`)
	reader := runCLI(t, env, "keys", "create", "--name", id+"-r", "--scopes", "features:read,tiles:read", "--db-role", "gg_tenant", "--claims", `{"tenant":"a"}`)
	items := base + "/collections/tenant_sites/items"
	tile := "/tiles/tenant_sites/12/2200/1343.mvt"

	// The tile is cached before the write.
	if _, body, _ := callAs(t, base, ka, tile); len(tileNames(t, body, "tenant_sites")) != 3 {
		t.Fatalf("tenant a's tile before the write: %v", tileNames(t, body, "tenant_sites"))
	}
	code, body, h := send(t, "POST", items, ka, `{"type":"Feature","id":10,"geometry":{"type":"Point","coordinates":[13.43,52.521]},"properties":{"tenant":"a","name":"a-new"}}`)
	if code != 201 || h.Get("Location") != items+"/10" || h.Get("ETag") == "" {
		t.Fatalf("POST: %d %s, Location %q, ETag %q; want 201, %s/10 and an ETag", code, body, h.Get("Location"), h.Get("ETag"), items)
	}
	created := h.Get("ETag")
	if _, body, _ := callAs(t, base, ka, tile); !slices.Contains(tileNames(t, body, "tenant_sites"), "a-new") {
		t.Errorf("the tile after the write lacks the new feature: %v", tileNames(t, body, "tenant_sites"))
	}
	_, _, h = callAs(t, base, ka, "/collections/tenant_sites/items/10")
	if got := h.Get("ETag"); !strings.HasPrefix(got, strings.TrimSuffix(created, `"`)+"-") {
		t.Errorf("GET's ETag %s does not name the version POST gave (%s)", got, created)
	}

	put := `{"type":"Feature","geometry":{"type":"Point","coordinates":[13.431,52.521]},"properties":{"tenant":"a","name":"a-renamed"}}`
	if code, body, _ := send(t, "PUT", items+"/10", ka, put, "If-Match", `"0123456789abcdef0123456789abcdef"`); code != 412 {
		t.Errorf("PUT with a stale If-Match: %d %s, want 412", code, body)
	}
	code, body, h = send(t, "PUT", items+"/10", ka, put, "If-Match", created)
	if code != 204 || h.Get("ETag") == "" || h.Get("ETag") == created {
		t.Fatalf("PUT with the current ETag: %d %s, ETag %q; want 204 and a new ETag", code, body, h.Get("ETag"))
	}
	code, body, h = send(t, "PATCH", items+"/10", ka, `{"properties":{"name":"a-patched"}}`, "If-Match", h.Get("ETag"))
	if code != 204 {
		t.Fatalf("PATCH: %d %s, want 204", code, body)
	}
	current := h.Get("ETag")
	_, body, _ = callAs(t, base, ka, "/collections/tenant_sites/items/10")
	var f struct {
		Properties map[string]any
		Geometry   struct{ Coordinates []float64 }
	}
	_ = json.Unmarshal(body, &f)
	if f.Properties["name"] != "a-patched" || f.Properties["tenant"] != "a" || len(f.Geometry.Coordinates) != 2 || f.Geometry.Coordinates[0] != 13.431 {
		t.Errorf("after the patch: %s; want a-patched of tenant a at 13.431", body)
	}

	// Two writers holding the same version: one wins, the other is told.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, name := range []string{"first", "second"} {
		wg.Go(func() {
			codes[i], _, _ = send(t, "PATCH", items+"/10", ka, `{"properties":{"name":"`+name+`"}}`, "If-Match", current)
		})
	}
	wg.Wait()
	if !(codes[0] == 204 && codes[1] == 412 || codes[0] == 412 && codes[1] == 204) {
		t.Errorf("two writers on one version: %v, want one 204 and one 412", codes)
	}

	for _, tc := range []struct {
		name, method, path, key, body string
		want                          int
	}{
		{"OtherTenantsRow", "POST", items, ka, `{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"tenant":"b","name":"sneaky"}}`, 403},
		{"OtherTenantCannotSeeIt", "PUT", items + "/10", kb, put, 404},
		{"OtherTenantCannotDelete", "DELETE", items + "/10", kb, "", 404},
		{"NotAColumn", "POST", items, ka, `{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"tenant":"a","colour":"red"}}`, 422},
		{"SQLInAName", "PATCH", items + "/10", ka, `{"properties":{"name = 'x'; DROP TABLE tenant_sites; --":"v"}}`, 422},
		{"NoGeometry", "POST", items, ka, `{"type":"Feature","properties":{"tenant":"a","name":"n"}}`, 422},
		{"NotGeoJSON", "POST", items, ka, `{"type":"Feature","geometry":{"type":"Blob","coordinates":[1]},"properties":{"tenant":"a","name":"n"}}`, 422},
		{"WrongGeometryType", "POST", items, ka, `{"type":"Feature","geometry":{"type":"LineString","coordinates":[[13.4,52.5],[13.5,52.6]]},"properties":{"tenant":"a","name":"n"}}`, 422},
		{"InvalidPolygon", "POST", base + "/collections/tenant_zones/items", ka, `{"type":"Feature","id":9,"geometry":{"type":"Polygon","coordinates":[[[13,52],[14,53],[14,52],[13,53],[13,52]]]},"properties":{"tenant":"a","name":"bowtie"}}`, 422},
		{"ValidPolygon", "POST", base + "/collections/tenant_zones/items", ka, `{"type":"Feature","id":9,"geometry":{"type":"Polygon","coordinates":[[[13,52],[14,52],[14,53],[13,53],[13,52]]]},"properties":{"tenant":"a","name":"square"}}`, 201},
		{"IDTaken", "POST", items, ka, `{"type":"Feature","id":1,"geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"tenant":"a","name":"n"}}`, 409},
		{"NotABody", "POST", items, ka, `[1,2]`, 422},
		{"NoKeyNoDefault", "POST", items, ka, `{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"tenant":"a","name":"n"}}`, 422},
		{"ReadOnlyCollection", "POST", base + "/collections/tenant_sites_view/items", ka, put, 405},
		{"UnknownCollection", "POST", base + "/collections/nope/items", ka, put, 404},
		{"NoWriteScope", "POST", items, reader, put, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := send(t, tc.method, tc.path, tc.key, tc.body)
			if code != tc.want {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, code, body, tc.want)
			}
			if strings.Contains(string(body), "SQLSTATE") || strings.Contains(string(body), "ERROR:") {
				t.Errorf("the answer leaks the database's text: %s", body)
			}
		})
	}

	// SQL in a value is a value.
	evil := `x'); DROP TABLE tenant_sites; --`
	code, body, h = send(t, "POST", items, ka, `{"type":"Feature","id":11,"geometry":{"type":"Point","coordinates":[13.42,52.52]},"properties":{"tenant":"a","name":"`+evil+`"}}`)
	if code != 201 {
		t.Fatalf("POST with SQL in a value: %d %s", code, body)
	}
	_, body, _ = callAs(t, base, ka, strings.TrimPrefix(h.Get("Location"), base))
	_ = json.Unmarshal(body, &f)
	if f.Properties["name"] != evil {
		t.Errorf("the value did not come back as sent: %s", body)
	}

	_, _, h = callAs(t, base, ka, "/collections/tenant_sites/items/10")
	latest := `"` + strings.SplitN(strings.Trim(h.Get("ETag"), `"`), "-", 2)[0] + `"`
	if code, body, _ := send(t, "DELETE", items+"/10", ka, "", "If-Match", current); code != 412 {
		t.Errorf("DELETE with the version before the race: %d %s, want 412", code, body)
	}
	if code, body, _ := send(t, "DELETE", items+"/10", ka, "", "If-Match", latest); code != 204 {
		t.Errorf("DELETE: %d %s, want 204", code, body)
	}
	if code, _, _ := callAs(t, base, ka, "/collections/tenant_sites/items/10"); code != 404 {
		t.Errorf("GET after DELETE: %d, want 404", code)
	}
	if _, body, _ := callAs(t, base, ka, tile); slices.Contains(tileNames(t, body, "tenant_sites"), "a-new") || slices.Contains(tileNames(t, body, "tenant_sites"), "first") || slices.Contains(tileNames(t, body, "tenant_sites"), "second") {
		t.Errorf("the tile after the delete still has the feature: %v", tileNames(t, body, "tenant_sites"))
	}
	clientsReadTheWrites(t, base, id+"-a", ka, []float64{1, 2, 3, 11}, []string{"a-one", "a-three", "a-two", evil})
}

// clientsReadTheWrites reads tenant_sites with GDAL's OAPIF driver,
// OWSLib and QGIS as the key keyID (secret key) and wants exactly the
// features of ids (OWSLib tells only those) and names want, sorted: what
// the writes left, not what was there before.
func clientsReadTheWrites(t *testing.T, base, keyID, key string, ids []float64, want []string) {
	t.Run("GDAL", func(t *testing.T) {
		out := gdal(t, "ogr2ogr", append(append([]string{"-f", "GeoJSON", "/vsistdout/"}, gdalAuth(key)...), "OAPIF:"+base, "tenant_sites")...)
		if got := featureNames(t, []byte(out)); !slices.Equal(got, want) {
			t.Errorf("ogr2ogr copied %v, want %v", got, want)
		}
	})
	t.Run("OWSLib", func(t *testing.T) {
		var got struct{ IDs []float64 }
		pythonClient(t, &got, "owslib_client.py", base, keyID, key, "tenant_sites", "13.3,52.4,13.5,52.6")
		if !slices.Equal(got.IDs, ids) {
			t.Errorf("OWSLib read ids %v, want %v", got.IDs, ids)
		}
	})
	t.Run("QGIS", func(t *testing.T) {
		var got struct {
			Valid bool
			Names []string
		}
		pythonClient(t, &got, "qgis_read.py", base, keyID, key, "tenant_sites")
		if !got.Valid || !slices.Equal(got.Names, want) {
			t.Errorf("QGIS read %v (valid %v), want %v", got.Names, got.Valid, want)
		}
	})
}
