package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/geogate/geogate/bench/internal/load"
	"github.com/geogate/geogate/internal/events"
)

// apiSide reports through POST /positions as one key.
type apiSide struct {
	c    *load.Client
	auth load.Header
}

// newAPISide subscribes the key of secret to the fences: pull only, or
// with its events going to the webhook hook when hook is not empty.
func newAPISide(base string, conc int, secret, hook string) (*apiSide, error) {
	c, err := load.NewClient(base, max(conc, 1)+1)
	if err != nil {
		return nil, err
	}
	a := &apiSide{c: c, auth: load.Header{"x-api-key: " + secret, "Content-Type: application/json"}}
	sub := map[string]any{"layer": "geofences", "kinds": []string{"enter", "exit"}}
	if hook != "" {
		sub["webhook"] = hook
	}
	body, _ := json.Marshal(sub)
	status, err := c.Do(conc, "POST", "/subscriptions", a.auth, body)
	if err != nil || status != 201 {
		c.Close()
		return nil, fmt.Errorf("POST /subscriptions: %d %v", status, err)
	}
	return a, nil
}

func (a *apiSide) close() { a.c.Close() }

// op reports batches of n of the devices named by prefix.
func (a *apiSide) op(f *fleet, prefix string, n int) load.Op {
	rngs := make([]*rand.Rand, 64)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 1))
	}
	return func(w, _ int) error {
		body, err := json.Marshal(wire(f.batch(prefix, w, rngs[w%len(rngs)])[:n]))
		if err != nil {
			return err
		}
		status, err := a.c.Do(w, "POST", "/positions", a.auth, body)
		if err == nil && status != 202 {
			err = fmt.Errorf("POST /positions: %d", status)
		}
		return err
	}
}

type wirePosition struct {
	Device string  `json:"device"`
	Time   string  `json:"time"`
	Lng    float64 `json:"lng"`
	Lat    float64 `json:"lat"`
}

func wire(ps []events.Position) []wirePosition {
	out := make([]wirePosition, len(ps))
	for i, p := range ps {
		out[i] = wirePosition{p.Device, p.Time.Format("2006-01-02T15:04:05.000000Z07:00"), p.Lng, p.Lat}
	}
	return out
}
