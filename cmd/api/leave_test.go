package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestClientLeavingMidRenderIs499: a client that goes away while its
// tile renders (held back by a lock on places) is logged once, at INFO,
// as 499; the cancelled statement is no 500, and no ERROR is logged.
func TestClientLeavingMidRenderIs499(t *testing.T) {
	pool, dbURL := placesDB(t)
	base, logs, _ := startServiceWithStop(t, map[string]string{
		"DATABASE_URL":          dbURL,
		"TILES_CACHE":           "false", // the request renders
		"TILES_MEMORY_CACHE_MB": "0",
	})
	const path = "/tiles/places/4/8/5.mvt"
	unlock := testenv.LockPlaces(t, pool)
	defer unlock()
	ctx, leave := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = errors.New("answered " + resp.Status)
		}
		gone <- err
	}()
	waitTileRenderBlocked(t, pool)
	leave()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request that left: %v, want it cancelled by its client", err)
	}
	var line string
	testenv.WaitFor(t, 10*time.Second, "the request's log line", func() bool {
		line = requestLine(logs.String(), path)
		return line != ""
	})
	if !strings.Contains(line, `"status":499`) || !strings.Contains(line, `"level":"INFO"`) {
		t.Errorf("log line of the request that left:\n%s\nwant status 499 at INFO", line)
	}
	unlock()
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) {
			t.Errorf("an ERROR was logged for a client that left:\n%s", l)
		}
	}
}

// requestLine is the access log line of path in logs, or "".
func requestLine(logs, path string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"path":"`+path+`"`) && strings.Contains(l, `"status":`) {
			return l
		}
	}
	return ""
}
