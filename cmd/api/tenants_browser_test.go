package main

import (
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/geogate/geogate/internal/testenv"
)

// TestMapShowsATenantsOwnRows opens the map page as each tenant's key in
// its own browser: the tile layer of the table under row-level security
// draws that tenant's sites, and none of the other's.
func TestMapShowsATenantsOwnRows(t *testing.T) {
	base, env, _ := tenantService(t)
	id := "map-" + testenv.Prefix(t)
	for _, tc := range []struct {
		tenant string
		want   []string
	}{{"a", []string{"a-one", "a-three", "a-two"}}, {"b", []string{"b-one", "b-two"}}} {
		t.Run(tc.tenant, func(t *testing.T) {
			key := runCLI(t, env, "keys", "create", "--name", id+"-"+tc.tenant, "--scopes", "tiles:read,proximity:read",
				"--db-role", "gg_tenant", "--claims", `{"tenant":"`+tc.tenant+`"}`)
			ctx, problems := newBrowser(t, false, mapBrowser)
			dir := artifactDir(t)
			defer func() {
				for _, p := range problems() {
					t.Errorf("browser: %s", p)
				}
			}()
			if err := chromedp.Do(ctx, signIn(base, key), jumpTo(13.41, 52.522, 13)); err != nil {
				t.Fatalf("opening the map: %v", err)
			}
			var names []string
			deadline := time.Now().Add(60 * time.Second)
			for !slices.Equal(names, tc.want) {
				if time.Now().After(deadline) {
					screenshot(t, ctx, dir, "tenant-"+tc.tenant)
					t.Fatalf("after 60s the map draws %v, want %v", names, tc.want)
				}
				time.Sleep(250 * time.Millisecond) // polling interval: tiles arrive when they arrive
				got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`geogateMap.getLayer('tenant_sites-points')
					? [...new Set(geogateMap.queryRenderedFeatures({layers: ['tenant_sites-points']}).map(f => f.properties.name))].sort()
					: []`))
				if err != nil {
					t.Fatal(err)
				}
				names = got
				for _, n := range names {
					if n[0] != tc.tenant[0] {
						screenshot(t, ctx, dir, "tenant-"+tc.tenant+"-other")
						t.Fatalf("the map of tenant %s draws %s, another tenant's site", tc.tenant, n)
					}
				}
			}
			screenshot(t, ctx, dir, "tenant-"+tc.tenant)
		})
	}
}
