package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestTenantsWatchTheirOwnZones subscribes two tenants to tenant_zones, a
// layer that runs as its caller, and reports each one's device at a point
// inside both tenants' zones: each is told of its own zone alone, as its
// own role and claims see the table, through the zones' lookups and a
// subscription's filter alike. A key with no database role may not
// subscribe, and one that loses its role is no longer evaluated.
func TestTenantsWatchTheirOwnZones(t *testing.T) {
	base, env, _ := tenantService(t)
	id := "ev-" + testenv.Prefix(t)
	key := func(name string, args ...string) eventsCaller {
		secret := runCLI(t, env, append([]string{"keys", "create", "--name", id + "-" + name, "--scopes", "all"}, args...)...)
		return eventsCaller{t: t, base: base, key: strings.TrimSpace(secret)}
	}
	a := key("a", "--db-role", "gg_tenant", "--claims", `{"tenant":"a"}`)
	b := key("b", "--db-role", "gg_tenant", "--claims", `{"tenant":"b"}`)
	none := key("none")

	subscribe := func(c eventsCaller, body string) string {
		t.Helper()
		status, got := c.do("POST", "/subscriptions", body)
		var sub struct{ ID string }
		if err := json.Unmarshal([]byte(got), &sub); status != 201 || err != nil {
			t.Fatalf("POST /subscriptions %s = %d %s, want 201", body, status, got)
		}
		return sub.ID
	}
	subA := subscribe(a, `{"layer":"tenant_zones","kinds":["enter","exit"]}`)
	filteredA := subscribe(a, `{"layer":"tenant_zones","kinds":["enter"],"filter":"name LIKE 'zone-%'"}`)
	subB := subscribe(b, `{"layer":"tenant_zones","kinds":["enter","exit"]}`)
	if status, got := none.do("POST", "/subscriptions", `{"layer":"tenant_zones","kinds":["enter"]}`); status != 403 || strings.Contains(got, "gg_tenant") {
		t.Errorf("a key with no role subscribing: %d %s, want a 403 naming no role", status, got)
	}

	// Inside both zones, then inside tenant a's alone.
	for _, c := range []eventsCaller{a, b} {
		if status, got := c.do("POST", "/positions", positionsBody("van", [2]float64{13.4, 52.5}, [2]float64{13.32, 52.42})); status != 202 {
			t.Fatalf("POST /positions = %d %s", status, got)
		}
	}
	for _, tc := range []struct {
		c    eventsCaller
		sub  string
		want []string
	}{
		{a, subA, []string{"enter 1"}},
		{a, filteredA, []string{"enter 1"}},
		{b, subB, []string{"enter 2", "exit 2"}},
	} {
		if got := eventsOf(t, tc.c, tc.sub); !slices.Equal(got, tc.want) {
			t.Errorf("events of %s = %v, want %v", tc.sub, got, tc.want)
		}
	}

	// Tenant a's key loses its role: its reports are still taken, and
	// its subscriptions to the layer are no longer evaluated, so leaving
	// the zone tells nothing.
	admin := key("admin")
	if status, got := admin.do("PATCH", "/admin/keys/"+id+"-a", `{"db_role":null}`); status != 200 {
		t.Fatalf("PATCH the key's role away: %d %s", status, got)
	}
	if status, got := a.do("POST", "/positions", positionsBody("van", [2]float64{13.0, 52.0})); status != 202 {
		t.Fatalf("POST /positions after the role was taken away = %d %s, want 202", status, got)
	}
	if got := eventsOf(t, a, subA); !slices.Equal(got, []string{"enter 1"}) {
		t.Errorf("events of the key without its role = %v, want no more than [enter 1]", got)
	}
}

// eventsOf lists the events pulled from subscription sub, in order, as
// "<kind> <fence>".
func eventsOf(t *testing.T, c eventsCaller, sub string) []string {
	t.Helper()
	out := []string{}
	for _, e := range pulled(t, c, sub) {
		out = append(out, e.Kind+" "+e.Fence)
	}
	return out
}

// pulledEvent is what the tests read of an event's data.
type pulledEvent struct{ Kind, Fence, Cause string }

// pulled is the first page of subscription sub's events, in order.
func pulled(t *testing.T, c eventsCaller, sub string) []pulledEvent {
	t.Helper()
	status, body := c.do("GET", "/events?subscription="+sub, "")
	var page struct {
		Events []struct{ Data pulledEvent }
	}
	if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil {
		t.Fatalf("GET /events = %d %s", status, body)
	}
	out := make([]pulledEvent, len(page.Events))
	for i, e := range page.Events {
		out[i] = e.Data
	}
	return out
}
