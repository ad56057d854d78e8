package events

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/webhook"
)

// FuzzPositions: any body of POST /positions is either a batch of valid
// positions or a validation error that names where the problem is and
// never echoes the body back.
func FuzzPositions(f *testing.F) {
	for _, s := range []string{
		`{"device":"a","time":"2026-01-01T00:00:00Z","lng":13.4,"lat":52.5}`,
		`[{"device":"a","time":"2026-01-01T00:00:00Z","lng":13.4,"lat":52.5,"accuracy":5,"speed":1,"heading":90}]`,
		`[]`, `{`, `[{"device":""}]`, `{"device":"a","time":"x","lng":"1","lat":null}`, `{"alt":1}`,
	} {
		f.Add(s)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body string) {
		ps, err := parsePositions([]byte(body), 50, now, time.Minute)
		checkOnePass(t, body, now.Add(time.Minute))
		if err != nil {
			checkValidation(t, err, body)
			return
		}
		if len(ps) == 0 || len(ps) > 50 {
			t.Fatalf("%d positions accepted, want 1 to 50", len(ps))
		}
		for _, p := range ps {
			if p.Device == "" || len(p.Device) > maxDeviceID || !utf8.ValidString(p.Device) ||
				p.Lng < -180 || p.Lng > 180 || p.Lat < -90 || p.Lat > 90 || p.Time.After(now.Add(time.Minute)) ||
				p.Accuracy != nil && *p.Accuracy < 0 || p.Heading != nil && (*p.Heading < 0 || *p.Heading >= 360) {
				t.Fatalf("accepted an invalid position %+v", p)
			}
		}
	})
}

// checkOnePass: when the one-pass reading of an array takes it, reading
// it position by position takes it too, with the same positions.
func checkOnePass(t *testing.T, body string, latest time.Time) {
	t.Helper()
	fast, ok := parseWhole([]byte(body), 50, latest)
	if !ok {
		return
	}
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(body), &raws); err != nil {
		t.Fatalf("read in one pass, but not an array of JSON values: %v", err)
	}
	errs := &apperr.ValidationError{}
	for i, raw := range raws {
		p, ok := parsePosition(raw, latest, errs, []any{"body", i})
		if !ok {
			t.Fatalf("position %d read in one pass, refused alone: %v", i, errs.Err())
		}
		if !reflect.DeepEqual(p, fast[i]) {
			t.Fatalf("position %d: one pass %+v, alone %+v", i, fast[i], p)
		}
	}
	if len(raws) != len(fast) {
		t.Fatalf("one pass read %d positions, alone %d", len(fast), len(raws))
	}
}

// FuzzSubscriptionBody: any subscription body is either a subscription
// that evaluation can take (a layer, known kinds, a dwell time with
// dwell, a webhook that passes the rules) or a validation error.
func FuzzSubscriptionBody(f *testing.F) {
	for _, s := range []string{
		`{"layer":"geofences","kinds":["enter","exit"]}`,
		`{"layer":"geofences","kinds":["dwell"],"dwellSeconds":60,"devices":["a"],"filter":"name = 'x'"}`,
		`{"layer":"x","kinds":["cross"],"webhook":"https://hooks.example.com/x"}`,
		`{"layer":"x","kinds":[],"webhook":"http://10.0.0.1/"}`, `{}`, `[`, `{"kinds":"enter"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		sub, err := parseSubscription([]byte(body), Subscription{}, Rules{})
		if err != nil {
			checkValidation(t, err, body)
			return
		}
		if sub.Layer == "" || len(sub.Kinds) == 0 || len(sub.Devices) > maxDevices {
			t.Fatalf("accepted %+v", sub)
		}
		for _, k := range sub.Kinds {
			if k != Enter && k != Exit && k != Dwell && k != Cross {
				t.Fatalf("accepted kind %q", k)
			}
			if k == Dwell && sub.DwellSeconds <= 0 {
				t.Fatalf("accepted dwell without a dwell time: %+v", sub)
			}
		}
		if msg := (webhook.Rules{}).Check(sub.Webhook); msg != "" {
			t.Fatalf("accepted webhook %q: %s", sub.Webhook, msg)
		}
	})
}

// checkValidation fails unless err is a 422 with located fields that do
// not repeat a long body.
func checkValidation(t *testing.T, err error, body string) {
	t.Helper()
	ve, ok := err.(*apperr.ValidationError)
	if !ok || len(ve.Fields) == 0 {
		t.Fatalf("error %v (%T), want a validation error", err, err)
	}
	b, _ := json.Marshal(ve.Fields)
	if len(body) > 40 && strings.Contains(string(b), body) {
		t.Fatalf("the error echoes the body: %s", b)
	}
	for _, fe := range ve.Fields {
		if len(fe.Loc) == 0 || fe.Loc[0] != "body" {
			t.Fatalf("field error %+v does not say where", fe)
		}
	}
}
