package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/testenv"
)

// headCompared are the headers a HEAD answer must share with its GET's;
// the others name the request (X-Request-ID, Date) or the budget left
// after it (RateLimit-*), which the GET before it changed.
var headCompared = []string{"Content-Type", "Content-Encoding", "ETag", "Cache-Control", "Vary",
	"Content-Security-Policy", "Link", "RateLimit-Policy", "WWW-Authenticate", "Allow"}

// TestHeadOnEveryGetRoute: every GET route of the table answers HEAD with
// the GET's status and headers and no body, with credentials and without
// (then as a 401 where GET is one: HEAD passes authentication as GET
// does). A tile the GET rendered is served to HEAD from the cache.
func TestHeadOnEveryGetRoute(t *testing.T) {
	db, dbURL := testenv.DBWithURL(t)
	var place int64
	if err := db.QueryRow(context.Background(), `INSERT INTO places (name, geom) VALUES ('Berlin', ST_SetSRID(ST_Point(13.4, 52.5), 4326)) RETURNING id`).Scan(&place); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none",
		"RATELIMIT_GEOFENCE": "1000/1s", "RATELIMIT_FEATURES": "1000/1s", "RATELIMIT_TILES": "1000/1s"}
	key := runCLI(t, env, "keys", "create", "--name", "head", "--scopes", "all")
	base, logs := startService(t, env)
	p := walkParams{layer: "places", polygon: "geofences", fence: "1", feature: strconv.FormatInt(place, 10)}
	for _, rt := range routes(&services{}) {
		if rt.method != "GET" {
			continue
		}
		url := walkOf(base, rt, p).url
		url = strings.NewReplacer("*filepath", "", "/static/", "/static/map.js", "/docs/assets/", "/docs/assets/docs.js",
			":tier", "default").Replace(url)
		for _, who := range []struct{ name, key string }{{"Key", key}, {"Anonymous", ""}} {
			t.Run(templatePath(rt.path)+"/"+who.name, func(t *testing.T) {
				// Go's client asks for gzip on GET only: ask on both.
				hdr := []string{"Accept-Encoding", "gzip"}
				if who.key != "" {
					hdr = append(hdr, "x-api-key", who.key)
				}
				getStatus, getHeader, _ := callWith(t, "GET", url, "", hdr...)
				status, header, body := callWith(t, "HEAD", url, "", hdr...)
				if status != getStatus || len(body) != 0 {
					t.Errorf("HEAD %s = %d with %d bytes of body, want %d (as GET) and none", url, status, len(body), getStatus)
				}
				for _, h := range headCompared {
					if h == "RateLimit-Policy" && rt.policy.Policy == config.PolicyTiles {
						continue // the GET rendered the tile and spent tiles; HEAD finds it cached
					}
					if got, want := header.Values(h), getHeader.Values(h); strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Errorf("HEAD %s: %s = %q, GET's %q", url, h, got, want)
					}
				}
				if rt.policy.Policy == config.PolicyTiles && who.key != "" && status == http.StatusOK && header.Get("X-Cache") == "MISS" {
					t.Errorf("HEAD %s after GET rendered the tile again (X-Cache miss)", url)
				}
			})
		}
	}
	if !strings.Contains(logs.String(), `"method":"HEAD"`) {
		t.Errorf("the access log shows no HEAD request")
	}
}

// TestHeadRendersAndCachesATile: HEAD of a tile nobody asked for yet must
// answer the GET's headers, ETag included, so it renders the tile; the
// render is then cached, so the GET that follows is a HIT with the same
// ETag and costs no second render.
func TestHeadRendersAndCachesATile(t *testing.T) {
	db, dbURL := testenv.DBWithURL(t)
	if _, err := db.Exec(context.Background(), `INSERT INTO places (name, geom) VALUES ('Berlin', ST_SetSRID(ST_Point(13.4, 52.5), 4326))`); err != nil {
		t.Fatal(err)
	}
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL})
	// A tile each, so that each starts uncached.
	for _, tc := range []struct{ name, gzip, tile string }{{"Plain", "", "4/8/5"}, {"Gzip", "gzip", "5/17/10"}} {
		t.Run(tc.name, func(t *testing.T) {
			url := base + "/tiles/places/" + tc.tile + ".mvt"
			var got, etags []string
			for _, method := range []string{"HEAD", "GET"} {
				status, header, body := callWith(t, method, url, "", "Accept-Encoding", tc.gzip)
				if status != http.StatusOK {
					t.Fatalf("%s %s = %d %s, want 200", method, url, status, body)
				}
				got = append(got, method+" "+header.Get("X-Cache"))
				etags = append(etags, header.Get("ETag"))
			}
			if want := "HEAD MISS, GET HIT"; strings.Join(got, ", ") != want {
				t.Errorf("X-Cache = %v, want %s", got, want)
			}
			if etags[0] == "" || etags[0] != etags[1] {
				t.Errorf("ETags = %q, want HEAD's and GET's the same", etags)
			}
		})
	}
}
