package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/testenv"
)

// sse is one message of an event stream: an event, or a comment.
type sse struct {
	id, event, data string
	comment         string
}

// openStream connects to the event stream of sub, after lastID when it is
// not "", and returns its messages as they arrive and the func that
// hangs up. The channel closes when the stream ends.
func openStream(t *testing.T, base, key, sub, lastID string) (<-chan sse, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/events/stream?subscription="+sub, nil)
	req.Header.Set("x-api-key", key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /events/stream: %v", err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("GET /events/stream = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sse, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var m sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m != (sse{}) {
					out <- m
				}
				m = sse{}
			case strings.HasPrefix(line, ":"):
				m.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				m.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				m.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				m.data = line[6:]
			}
		}
	}()
	t.Cleanup(cancel)
	return out, cancel
}

// nextEvent returns the next event of the stream, skipping comments.
func nextEvent(t *testing.T, ms <-chan sse) sse {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-ms:
			if !ok {
				t.Fatal("the stream ended while an event was awaited")
			}
			if m.comment == "" {
				return m
			}
		case <-timeout:
			t.Fatal("no event within 15s")
		}
	}
}

// boxSubscription makes, as key, a fence from (10, 50) to (11, 51) and a
// subscription to its enters and exits, and returns the subscription.
func boxSubscription(t *testing.T, base, key string) (sub struct{ ID string }) {
	t.Helper()
	const box = `{"type":"Feature","properties":{"name":"box"},"geometry":{"type":"Polygon","coordinates":[[[10,50],[11,50],[11,51],[10,51],[10,50]]]}}`
	if status, _, body := call(t, "POST", base+"/geofences", key, box); status != 201 {
		t.Fatalf("POST /geofences = %d %s", status, body)
	}
	status, _, body := call(t, "POST", base+"/subscriptions", key, `{"layer":"geofences","kinds":["enter","exit"]}`)
	if err := json.Unmarshal(body, &sub); status != 201 || err != nil {
		t.Fatalf("POST /subscriptions = %d %s", status, body)
	}
	return sub
}

// TestEventStream follows a subscription's stream: events reported after
// connecting arrive in order, with the CloudEvent as data; the stream
// outlives the server's write timeout; a reconnection with Last-Event-ID
// gets exactly the events it missed; and shutdown ends the stream.
func TestEventStream(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL": dbURL, "HTTP_WRITE_TIMEOUT": "1s", "HTTP_READ_TIMEOUT": "1s",
		"EVENTS_STREAM_HEARTBEAT": "200ms", "RATELIMIT_EVENTS": "1000/1s",
	}
	key := "stream-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _, stop := startServiceWithStop(t, env)

	sub := boxSubscription(t, base, key)
	start := time.Now().Add(-time.Hour)
	n := 0
	// move reports the device in (true) or out of the box, each a second
	// after the last.
	move := func(in ...bool) {
		t.Helper()
		var ps []string
		for _, inside := range in {
			n++
			lng := 9.5
			if inside {
				lng = 10.5
			}
			ps = append(ps, fmt.Sprintf(`{"device":"d1","time":%q,"lng":%v,"lat":50.5}`, start.Add(time.Duration(n)*time.Second).Format(time.RFC3339), lng))
		}
		if status, _, body := call(t, "POST", base+"/positions", key, "["+strings.Join(ps, ",")+"]"); status != 202 {
			t.Fatalf("POST /positions = %d %s", status, body)
		}
	}
	// expect reads the next events and checks their kinds, their ids
	// (increasing, after last) and their data; it returns the last id.
	expect := func(ms <-chan sse, last int64, kinds ...string) int64 {
		t.Helper()
		for _, want := range kinds {
			m := nextEvent(t, ms)
			id, err := strconv.ParseInt(m.id, 10, 64)
			if err != nil || id <= last {
				t.Fatalf("event id %q after %d: want a greater number", m.id, last)
			}
			var ce struct {
				SpecVersion, Type, Subject, Sequence string
			}
			if err := json.Unmarshal([]byte(m.data), &ce); err != nil {
				t.Fatalf("data %q is not JSON: %v", m.data, err)
			}
			if m.event != want || ce.Type != "io.geogate.geofence."+want || ce.Subject != "d1" || ce.Sequence != m.id || ce.SpecVersion != "1.0" {
				t.Fatalf("event %q %s %+v, want %s of d1 with sequence %s", m.event, m.id, ce, want, m.id)
			}
			last = id
		}
		return last
	}

	ms, hangUp := openStream(t, base, key, sub.ID, "")
	connected := time.Now()
	move(false, true, false, true)
	last := expect(ms, 0, "enter", "exit", "enter")

	// Past the server's write timeout the stream still carries events.
	for time.Since(connected) < 2500*time.Millisecond {
		if m, ok := <-ms; !ok {
			t.Fatal("the stream ended within the server's timeouts")
		} else if m.comment == "" {
			t.Fatalf("unexpected event %+v", m)
		}
	}
	move(false)
	last = expect(ms, last, "exit")

	// Gone: what happens meanwhile arrives after the reconnection, once.
	hangUp()
	move(true, false)
	ms, _ = openStream(t, base, key, sub.ID, strconv.FormatInt(last, 10))
	last = expect(ms, last, "enter", "exit")
	move(true)
	expect(ms, last, "enter")

	// Everything the outbox holds was streamed: 7 events in all.
	status, _, body := call(t, "GET", base+"/events?subscription="+sub.ID, key, "")
	var page struct{ Events []json.RawMessage }
	if err := json.Unmarshal(body, &page); status != 200 || err != nil || len(page.Events) != 7 {
		t.Fatalf("GET /events = %d, %d events, want the 7 streamed: %s", status, len(page.Events), body)
	}

	// Shutdown ends the stream at once, not at the shutdown's deadline.
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for range ms { // drains until the stream ends
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("shutdown with a stream open took %v, want it ended at once", d)
	}
}

// TestPrunedCursorOverHTTP: once retention has deleted events a reader
// had not reached, its cursor is a 410 naming the oldest valid one, on a
// page and on a stream (before the stream begins); from that cursor, or
// with none, it reads on.
func TestPrunedCursorOverHTTP(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_EVENTS": "1000/1s"}
	key := "pruned-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _ := startService(t, env)
	sub := boxSubscription(t, base, key)
	if status, _, body := call(t, "POST", base+"/positions", key, positionsBody("d1", [2]float64{10.5, 50.5}, [2]float64{9.5, 50.5})); status != 202 {
		t.Fatalf("POST /positions = %d %s", status, body)
	}
	ctx := context.Background()
	var enter int64
	err := pool.QueryRow(ctx, `UPDATE geogate.events SET created_at = now() - interval '31 days'
WHERE subscription = $1::uuid AND kind = 'enter' RETURNING seq`, sub.ID).Scan(&enter)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := events.NewRetention(pool, events.Keep{}, 0, nil, nil).PruneEvents(ctx, time.Now().Add(-720*time.Hour)); err != nil || n != 1 {
		t.Fatalf("PruneEvents() = %d, %v; want the enter pruned", n, err)
	}
	page := base + "/events?subscription=" + sub.ID
	wantGone := fmt.Sprintf("after=%d", enter)
	if status, _, body := call(t, "GET", page+"&after=0", key, ""); status != 410 || !strings.Contains(string(body), wantGone) {
		t.Errorf("GET /events after 0 once pruned = %d %s, want 410 naming %s", status, body, wantGone)
	}
	req, _ := http.NewRequest("GET", base+"/events/stream?subscription="+sub.ID, nil)
	req.Header.Set("x-api-key", key)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	streamed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 410 || !strings.Contains(string(streamed), wantGone) {
		t.Errorf("GET /events/stream from 0 once pruned = %d %s, want 410 naming %s", resp.StatusCode, streamed, wantGone)
	}
	for _, q := range []string{"", fmt.Sprintf("&after=%d", enter)} {
		status, _, body := call(t, "GET", page+q, key, "")
		var got struct {
			Events []struct{ Type string }
		}
		if err := json.Unmarshal(body, &got); status != 200 || err != nil || len(got.Events) != 1 || got.Events[0].Type != "io.geogate.geofence.exit" {
			t.Errorf("GET /events%s = %d %s, want 200 with the exit alone", q, status, body)
		}
	}
}
