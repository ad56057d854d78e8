package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/geogate/geogate/internal/apperr"
)

// maxDeviceID bounds a device id, in bytes.
const maxDeviceID = 128

// deviceIDRule is what validDeviceID checks, as a 422 says it.
var deviceIDRule = fmt.Sprintf("A device id is 1 to %d bytes of printable UTF-8.", maxDeviceID)

// validDeviceID reports whether d may name a device.
func validDeviceID(d string) bool {
	return d != "" && len(d) <= maxDeviceID && utf8.ValidString(d) && !strings.ContainsFunc(d, isControl)
}

// positionBody is one position as a client sends it.
type positionBody struct {
	Device   *string    `json:"device"`
	Time     *time.Time `json:"time"`
	Lng      *float64   `json:"lng"`
	Lat      *float64   `json:"lat"`
	Accuracy *float64   `json:"accuracy"`
	Speed    *float64   `json:"speed"`
	Heading  *float64   `json:"heading"`
}

// parsePositions reads the body of POST /positions: one position, or an
// array of at most max. Every problem is a 422 naming where it is.
func parsePositions(body []byte, max int, now time.Time, skew time.Duration) ([]Position, error) {
	body = bytes.TrimSpace(body)
	var raws []json.RawMessage
	single := len(body) > 0 && body[0] == '{'
	switch {
	case len(body) == 0:
		return nil, apperr.InvalidField("Body required: a position, or an array of positions.", "missing", "body")
	case single:
		raws = []json.RawMessage{body}
	default:
		if ps, ok := parseWhole(body, max, now.Add(skew)); ok {
			return ps, nil
		}
		if err := json.Unmarshal(body, &raws); err != nil {
			return nil, apperr.InvalidField("Body must be a JSON object (a position) or an array of them.", "json_invalid", "body")
		}
	}
	if len(raws) == 0 {
		return nil, apperr.InvalidField("The array holds no position.", "too_short", "body")
	}
	if len(raws) > max {
		return nil, apperr.InvalidField(fmt.Sprintf("At most %d positions per request.", max), "too_long", "body")
	}
	errs := &apperr.ValidationError{}
	out := make([]Position, 0, len(raws))
	for i, raw := range raws {
		loc := []any{"body", i}
		if single {
			loc = []any{"body"}
		}
		if p, ok := parsePosition(raw, now.Add(skew), errs, loc); ok {
			out = append(out, p)
		}
		if len(errs.Fields) >= 20 {
			break
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseWhole reads an array of valid positions in one pass, the common
// case; it fails, and the caller goes through the body position by
// position to say where each problem is, on anything else.
func parseWhole(body []byte, max int, latest time.Time) ([]Position, bool) {
	var bs []positionBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bs); err != nil || len(bs) == 0 || len(bs) > max {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // something follows the array
	}
	out := make([]Position, len(bs))
	errs := &apperr.ValidationError{}
	for i, b := range bs {
		p, ok := checkPosition(b, latest, errs, nil)
		if !ok {
			return nil, false
		}
		out[i] = p
	}
	return out, true
}

func parsePosition(raw json.RawMessage, latest time.Time, errs *apperr.ValidationError, loc []any) (Position, bool) {
	var b positionBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		errs.Add(decodeProblem(err), "value_error", loc...)
		return Position{}, false
	}
	return checkPosition(b, latest, errs, loc)
}

// checkPosition validates b, adding its problems to errs at loc.
func checkPosition(b positionBody, latest time.Time, errs *apperr.ValidationError, loc []any) (Position, bool) {
	at := func(field string) []any { return append(slices.Clone(loc), field) }
	n := len(errs.Fields)
	switch {
	case b.Device == nil:
		errs.Add("Field required.", "missing", at("device")...)
	case !validDeviceID(*b.Device):
		errs.Add(deviceIDRule, "value_error", at("device")...)
	}
	switch {
	case b.Time == nil:
		errs.Add("Field required: an RFC 3339 time.", "missing", at("time")...)
	case b.Time.After(latest):
		errs.Add("The time lies in the future.", "value_error", at("time")...)
	}
	checkNumber(errs, b.Lng, -180, 180, true, at("lng"))
	checkNumber(errs, b.Lat, -90, 90, true, at("lat"))
	checkNumber(errs, b.Accuracy, 0, math.MaxFloat64, false, at("accuracy"))
	checkNumber(errs, b.Speed, 0, math.MaxFloat64, false, at("speed"))
	if b.Heading != nil && (*b.Heading < 0 || *b.Heading >= 360) {
		errs.Add("Must be at least 0 and below 360.", "value_error", at("heading")...)
	}
	if len(errs.Fields) > n {
		return Position{}, false
	}
	return Position{Device: *b.Device, Time: *b.Time, Lng: *b.Lng, Lat: *b.Lat, Accuracy: b.Accuracy, Speed: b.Speed, Heading: b.Heading}, true
}

func checkNumber(errs *apperr.ValidationError, v *float64, lo, hi float64, required bool, loc []any) {
	switch {
	case v == nil && required:
		errs.Add("Field required.", "missing", loc...)
	case v == nil:
	case *v < lo || *v > hi:
		errs.Add(fmt.Sprintf("Must be between %g and %g.", lo, hi), "value_error", loc...)
	}
}

// decodeProblem says what is wrong with a position's JSON without echoing
// it.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s: must be a %s.", te.Field, jsonKind(te.Field))
	case errors.As(err, &pe):
		return "time: must be an RFC 3339 time such as 2026-01-02T15:04:05Z."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "Unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + ": a position has device, time, lng, lat, accuracy, speed and heading."
	}
	return "Must be a JSON object with device, time, lng and lat."
}

func jsonKind(field string) string {
	switch field {
	case "device":
		return "string"
	case "time":
		return "RFC 3339 time string"
	}
	return "number"
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// subscriptionBody is a subscription as a client sends it.
type subscriptionBody struct {
	Layer        *string  `json:"layer"`
	Filter       *string  `json:"filter"`
	Devices      []string `json:"devices"`
	Kinds        []string `json:"kinds"`
	DwellSeconds *int64   `json:"dwellSeconds"`
	Webhook      *string  `json:"webhook"`
}

// maxDevices bounds a subscription's device list.
const maxDevices = 1000

// parseSubscription reads the body of POST /subscriptions or PATCH, over
// base (the subscription as it is, for PATCH), under the webhook rules r.
func parseSubscription(body []byte, base Subscription, r Rules) (Subscription, error) {
	var b subscriptionBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return Subscription{}, apperr.InvalidField("Body must be a JSON object with layer, kinds and optionally filter, devices, dwellSeconds and webhook: "+subscriptionProblem(err), "value_error", "body")
	}
	errs := &apperr.ValidationError{}
	sub := base
	if b.Layer != nil {
		sub.Layer = *b.Layer
	}
	if sub.Layer == "" {
		errs.Add("Field required: the polygon layer to watch.", "missing", "body", "layer")
	}
	if b.Filter != nil {
		sub.Filter = *b.Filter
	}
	if b.Devices != nil {
		sub.Devices = b.Devices
		if len(b.Devices) > maxDevices {
			errs.Add(fmt.Sprintf("At most %d devices.", maxDevices), "too_long", "body", "devices")
		}
		for i, d := range b.Devices {
			if !validDeviceID(d) {
				errs.Add(deviceIDRule, "value_error", "body", "devices", i)
			}
		}
	}
	if b.Kinds != nil {
		sub.Kinds = nil
		for i, k := range b.Kinds {
			if !slices.Contains(Kinds, Kind(k)) {
				errs.Add(`Must be "enter", "exit", "dwell" or "cross".`, "enum", "body", "kinds", i)
			} else if !slices.Contains(sub.Kinds, Kind(k)) {
				sub.Kinds = append(sub.Kinds, Kind(k))
			}
		}
	}
	if len(sub.Kinds) == 0 && len(errs.Fields) == 0 {
		errs.Add(`Field required: one or more of "enter", "exit", "dwell", "cross".`, "missing", "body", "kinds")
	}
	if b.DwellSeconds != nil {
		sub.DwellSeconds = *b.DwellSeconds
		if *b.DwellSeconds < 0 || *b.DwellSeconds > 366*86400 {
			errs.Add("Must be between 0 and 31622400 (a year).", "value_error", "body", "dwellSeconds")
		}
	}
	if slices.Contains(sub.Kinds, Dwell) && sub.DwellSeconds <= 0 {
		errs.Add(`A "dwell" subscription needs dwellSeconds above 0.`, "missing", "body", "dwellSeconds")
	}
	if b.Webhook != nil {
		sub.Webhook = *b.Webhook
		if msg := r.Webhooks.Check(sub.Webhook); msg != "" {
			errs.Add(msg, "url_parsing", "body", "webhook")
		}
	}
	return sub, errs.Err()
}

func subscriptionProblem(err error) string {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return te.Field + " has the wrong type."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "."
	}
	return "malformed JSON."
}
