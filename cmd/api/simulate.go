package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/geogate/geogate/internal/simulate"
)

// simulateCmd moves a small simulated fleet through a running service's
// API, across the demo countries' borders, until interrupted.
func simulateCmd(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := simulate.Options{}
	fs.StringVar(&o.BaseURL, "url", "http://localhost:8000", "the service's base URL")
	fs.StringVar(&o.Key, "key", "demo", "an API key with positions:write, events:read and events:write")
	fs.IntVar(&o.Devices, "devices", 5, "how many devices")
	fs.StringVar(&o.Prefix, "prefix", "sim", "device ids are PREFIX-1 to PREFIX-N")
	fs.DurationVar(&o.Interval, "interval", time.Second, "time between two batches of positions")
	fs.DurationVar(&o.Lap, "lap", 2*time.Minute, "time a device takes over its route one way")
	fs.IntVar(&o.Steps, "steps", 0, "send this many batches, then stop (0: until interrupted)")
	fs.IntVar(&o.DwellSeconds, "dwell", 30, "dwell time, in seconds, of the subscription made when none fits")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Devices < 1 || o.Devices > 1000 || o.Interval <= 0 || o.Lap <= 0 || o.Steps < 0 || o.DwellSeconds < 1 {
		return errors.New("simulate: --devices 1 to 1000, and a positive --interval, --lap and --dwell, are required")
	}
	return simulate.Run(ctx, o, stdout)
}
