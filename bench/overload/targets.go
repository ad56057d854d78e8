package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/bench/internal/load"
)

// createKeys makes n API keys named prefix-00, prefix-01... with fixed
// secrets, replacing them if they exist, so that every run's callers are
// the same identities with the same scopes and default tier. It returns
// the header each key is sent with. With account set, every key is that
// account's.
func createKeys(bin, dbURL, prefix string, n int, account string) ([]load.Header, error) {
	out := make([]load.Header, n)
	for i := range out {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		secret := name + "-bench-secret"
		cmd := exec.Command(bin, "keys", "create", "--name", name, "--secret", secret, "--replace",
			"--scopes", "proximity:read,features:read,tiles:read")
		if account != "" {
			cmd.Args = append(cmd.Args, "--account", account)
		}
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("keys create %s: %v: %s", name, err, msg)
		}
		out[i] = load.Header{"x-api-key: " + secret}
	}
	return out, nil
}

// cityPoints returns n random city positions, the same ones every run.
func cityPoints(ctx context.Context, pool *pgxpool.Pool, n int) ([][2]float64, error) {
	rows, err := pool.Query(ctx, "SELECT ST_X(geom), ST_Y(geom) FROM places ORDER BY id")
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]float64, error) {
		var p [2]float64
		err := r.Scan(&p[0], &p[1])
		return p, err
	})
	if err != nil || len(all) == 0 {
		return nil, fmt.Errorf("read cities: %v (%d rows)", err, len(all))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	out := make([][2]float64, n)
	for i := range out {
		out[i] = all[rng.IntN(len(all))]
	}
	return out, nil
}

// heavy is what the heavy callers ask for, each kind in turn.
type heavy struct {
	within, boxes, cursors, tiles []string
}

// next is the heavy request number i: the kinds take turns, and within a
// kind the targets do, so that tiles and pages differ from one request to
// the next.
func (h heavy) next(i int) string {
	kinds := [][]string{h.within, h.boxes, h.cursors, h.tiles}
	k := kinds[i%len(kinds)]
	return k[(i/len(kinds))%len(k)]
}

func heavyTargets(points [][2]float64, cursors []string) heavy {
	var h heavy
	for _, p := range points {
		h.within = append(h.within, fmt.Sprintf("/within?lng=%.5f&lat=%.5f&radius=20000", p[0], p[1]))
		// A box of 5 degrees around a city holds from a few to thousands
		// of places; the first page of a box also counts them all.
		h.boxes = append(h.boxes, fmt.Sprintf("/collections/places/items?limit=1000&bbox=%.3f,%.3f,%.3f,%.3f",
			p[0]-2.5, max(p[1]-2.5, -90), p[0]+2.5, min(p[1]+2.5, 90)))
	}
	h.cursors = cursors
	// Low zooms read many rows per tile; z4 and z5 have 1,280 tiles per
	// layer, all distinct within a trial's requests of this kind.
	for _, layer := range []string{"places", "geofences"} {
		for z := 4; z <= 5; z++ {
			for x := range 1 << z {
				for y := range 1 << z {
					h.tiles = append(h.tiles, fmt.Sprintf("/tiles/%s/%d/%d/%d.mvt", layer, z, x, y))
				}
			}
		}
	}
	rand.New(rand.NewPCG(7, 8)).Shuffle(len(h.tiles), func(i, j int) { h.tiles[i], h.tiles[j] = h.tiles[j], h.tiles[i] })
	return h
}

func lightTargets(points [][2]float64) []string {
	var out []string
	for _, p := range points {
		out = append(out, fmt.Sprintf("/within?lng=%.5f&lat=%.5f&radius=1000", p[0], p[1]))
	}
	return out
}

// cursorPages walks the first n+1 items pages of 1,000 places through
// their next links and returns the next links: pages deep into the layer,
// as a client copying it would ask for them.
func cursorPages(base string, key load.Header, n int) ([]string, error) {
	target := "/collections/places/items?limit=1000"
	var out []string
	for len(out) < n {
		next, err := nextLink(base, target, key)
		if err != nil {
			return nil, err
		}
		if next == "" {
			break
		}
		out = append(out, next)
		target = next
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no next link in %s/collections/places/items", base)
	}
	return out, nil
}

// nextLink fetches target and returns the request target (path and query)
// of its next link, "" on the last page.
func nextLink(base, target string, key load.Header) (string, error) {
	req, err := http.NewRequest("GET", base+target, nil)
	if err != nil {
		return "", err
	}
	for _, h := range key {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(name, strings.TrimSpace(value))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: status %d", target, resp.StatusCode)
	}
	var page struct {
		Links []struct{ Rel, Href string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return "", err
	}
	for _, l := range page.Links {
		if l.Rel == "next" {
			u, err := url.Parse(l.Href)
			if err != nil {
				return "", err
			}
			return u.RequestURI(), nil
		}
	}
	return "", nil
}
