package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestSimulate runs the simulated fleet against the demo countries: it
// makes one pull subscription (and reuses it on a second run), its
// devices appear in GET /devices, and their routes cross borders, so the
// subscription hears enters and exits of several countries.
func TestSimulate(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	key := "sim-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "positions:write,events:read,events:write,geofences:read")
	base, _ := startService(t, env)

	simulate := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		args := []string{"simulate", "--url", base, "--key", key, "--steps", "41", "--interval", "5ms", "--lap", "100ms"}
		if err := run(context.Background(), args, envMap(nil), &out, &errOut); err != nil {
			t.Fatalf("api simulate: %v\n%s%s", err, out.String(), errOut.String())
		}
		return out.String()
	}
	if out := simulate(); !strings.Contains(out, "created subscription") {
		t.Errorf("first run: %s\nwant it to create a subscription", out)
	}
	if out := simulate(); !strings.Contains(out, "using subscription") {
		t.Errorf("second run: %s\nwant it to use the subscription the first made", out)
	}

	_, _, body := call(t, "GET", base+"/devices", key, "")
	var devs struct{ Devices []struct{ ID string } }
	if err := json.Unmarshal(body, &devs); err != nil || len(devs.Devices) != 5 || devs.Devices[0].ID != "sim-1" {
		t.Fatalf("GET /devices = %s, want sim-1 to sim-5", body)
	}
	_, _, body = call(t, "GET", base+"/subscriptions", key, "")
	var subs struct{ Subscriptions []struct{ ID string } }
	if err := json.Unmarshal(body, &subs); err != nil || len(subs.Subscriptions) != 1 {
		t.Fatalf("GET /subscriptions = %s, want the one subscription", body)
	}
	_, _, body = call(t, "GET", base+"/events?limit=1000&subscription="+subs.Subscriptions[0].ID, key, "")
	var page struct {
		Events []struct {
			Data struct{ Device, Kind, Fence string }
		}
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	// Each device, on its own route, enters at least two countries and
	// leaves one.
	fences := map[string]map[string]bool{}
	exits := map[string]int{}
	for _, e := range page.Events {
		if fences[e.Data.Device] == nil {
			fences[e.Data.Device] = map[string]bool{}
		}
		switch e.Data.Kind {
		case "enter":
			fences[e.Data.Device][e.Data.Fence] = true
		case "exit":
			exits[e.Data.Device]++
		}
	}
	for _, d := range []string{"sim-1", "sim-2", "sim-3", "sim-4", "sim-5"} {
		if len(fences[d]) < 2 || exits[d] < 1 {
			t.Errorf("%s entered %v and left %d times; want two countries or more and an exit", d, fences[d], exits[d])
		}
	}
}
