package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options say what to simulate and against which service.
type Options struct {
	BaseURL string // the service, e.g. http://localhost:8000
	Key     string // an API key with positions:write, events:read and events:write
	Devices int    // how many devices
	Prefix  string // device ids are Prefix-1 to Prefix-n
	// Interval is the time between two batches of positions; Lap the
	// time a device takes over its route one way.
	Interval, Lap time.Duration
	// Steps bounds the batches sent; 0 sends until ctx ends.
	Steps int
	// DwellSeconds is the dwell time of the subscription made when none
	// fits.
	DwellSeconds int
}

// Layer is the layer the simulation's subscription watches: the
// built-in fences, which the demo fills with the world's countries.
const Layer = "geofences"

// Run makes sure the caller has a pull subscription to Layer for enter,
// exit and dwell, then moves the fleet, sending one batch of positions
// per interval, and writes a line per batch to out. It returns nil when
// ctx ends or the steps are done, and an error when the service refuses
// the key (401, 403) or a request outright.
func Run(ctx context.Context, o Options, out io.Writer) error {
	c := &client{base: strings.TrimRight(o.BaseURL, "/"), key: o.Key, http: &http.Client{Timeout: 30 * time.Second}}
	sub, made, err := c.subscription(ctx, o.DwellSeconds)
	if err != nil {
		return err
	}
	verb := "using"
	if made {
		verb = "created"
	}
	fmt.Fprintf(out, "%s subscription %s on %s (enter, exit, dwell)\n", verb, sub, Layer)
	fmt.Fprintf(out, "follow it: curl -N -H 'x-api-key: %s' '%s/events/stream?subscription=%s'\n", o.Key, c.base, sub)
	devs := fleet(o.Prefix, o.Devices)
	for _, d := range devs {
		fmt.Fprintf(out, "%s drives %s\n", d.id, d.route.name)
	}
	start := time.Now()
	last := map[string]point{}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	total := 0
	for step := 1; o.Steps == 0 || step <= o.Steps; step++ {
		now := time.Now()
		batch := positions(devs, last, now, now.Sub(start), o.Interval, o.Lap)
		n, err := c.report(ctx, batch)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errRefused):
			return err
		case err != nil:
			fmt.Fprintf(out, "%s %v; trying again next tick\n", now.Format("15:04:05"), err)
		default:
			total += n
			fmt.Fprintf(out, "%s %d positions, %d events (%d in all)\n", now.Format("15:04:05"), len(batch), n, total)
		}
		if o.Steps != 0 && step == o.Steps {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// position is one position as POST /positions takes it.
type position struct {
	Device   string    `json:"device"`
	Time     time.Time `json:"time"`
	Lng      float64   `json:"lng"`
	Lat      float64   `json:"lat"`
	Accuracy float64   `json:"accuracy"`
	Speed    *float64  `json:"speed,omitempty"`
	Heading  *float64  `json:"heading,omitempty"`
}

// positions is the fleet's batch at elapsed time, with each device's speed
// and heading from where it was last (last is updated).
func positions(devs []device, last map[string]point, now time.Time, elapsed, interval, lap time.Duration) []position {
	out := make([]position, 0, len(devs))
	for _, d := range devs {
		p := d.where(elapsed, lap)
		pos := position{Device: d.id, Time: now.UTC(), Lng: round(p.lng), Lat: round(p.lat), Accuracy: 10}
		if prev, ok := last[d.id]; ok && prev != p {
			speed, heading := metres(prev, p)/interval.Seconds(), bearing(prev, p)
			pos.Speed, pos.Heading = &speed, &heading
		}
		last[d.id] = p
		out = append(out, pos)
	}
	return out
}

// round keeps 6 decimals, about 10 cm.
func round(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 6, 64), 64)
	return f
}

// errRefused is an answer that another try will not change: bad
// credentials, a missing scope, a request the service rejects.
var errRefused = errors.New("refused")

type client struct {
	base, key string
	http      *http.Client
}

// do sends a JSON request and decodes a 2xx answer into into (nil: drop
// it). A 429 waits for Retry-After and tries again.
func (c *client) do(ctx context.Context, method, path string, body, into any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	for {
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("x-api-key", c.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(max(wait, 1)) * time.Second):
			}
			continue
		case resp.StatusCode >= 500:
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
		case resp.StatusCode >= 400:
			return fmt.Errorf("%w: %s %s: %d %s", errRefused, method, path, resp.StatusCode, bytes.TrimSpace(data))
		}
		if into == nil {
			return nil
		}
		return json.Unmarshal(data, into)
	}
}

// report sends a batch and returns the events it caused.
func (c *client) report(ctx context.Context, batch []position) (int, error) {
	var r struct{ Events int }
	err := c.do(ctx, "POST", "/positions", batch, &r)
	return r.Events, err
}

type subscription struct {
	ID      string   `json:"id,omitempty"`
	Layer   string   `json:"layer"`
	Kinds   []string `json:"kinds"`
	Dwell   int      `json:"dwellSeconds,omitempty"`
	Webhook string   `json:"webhook,omitempty"`
	Filter  string   `json:"filter,omitempty"`
	Devices []string `json:"devices,omitempty"`
}

// subscription returns the id of the caller's pull subscription to every
// enter, exit and dwell of Layer, making one when none fits; made says
// it did.
func (c *client) subscription(ctx context.Context, dwell int) (id string, made bool, err error) {
	var list struct{ Subscriptions []subscription }
	if err := c.do(ctx, "GET", "/subscriptions", nil, &list); err != nil {
		return "", false, err
	}
	for _, s := range list.Subscriptions {
		if s.Layer == Layer && s.Webhook == "" && s.Filter == "" && len(s.Devices) == 0 &&
			slices.Contains(s.Kinds, "enter") && slices.Contains(s.Kinds, "exit") && slices.Contains(s.Kinds, "dwell") {
			return s.ID, false, nil
		}
	}
	var s subscription
	err = c.do(ctx, "POST", "/subscriptions", subscription{Layer: Layer, Kinds: []string{"enter", "exit", "dwell"}, Dwell: dwell}, &s)
	return s.ID, true, err
}
