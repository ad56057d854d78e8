package events

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/pg"
)

// Subscription is what an identity watches and where its events go.
type Subscription struct {
	ID string `json:"id"`
	// Layer is the polygon layer watched; Filter, a CQL2 text filter on
	// its features' properties, narrows it; Devices, when not empty, are
	// the only devices watched.
	Layer   string   `json:"layer"`
	Filter  string   `json:"filter,omitempty"`
	Devices []string `json:"devices,omitempty"`
	Kinds   []Kind   `json:"kinds"`
	// DwellSeconds is the time inside a fence after which a dwell event
	// is told, once per stay; 0 without dwell.
	DwellSeconds int64 `json:"dwellSeconds,omitempty"`
	// Webhook receives the events; without one they are only pulled.
	Webhook string `json:"webhook,omitempty"`
	// Secret signs the webhook's deliveries. It is shown only when it is
	// made: at creation and rotation.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

var errNoSubscription = apperr.New(apperr.NotFound, "No such subscription: GET /subscriptions lists yours.")

const subscriptionColumns = `id::text, layer, coalesce(filter, ''), coalesce(devices, '{}'), kinds,
  coalesce(dwell_ms / 1000, 0), coalesce(webhook, ''), created_at, updated_at`

func scanSubscription(row pgx.Row) (Subscription, error) {
	var sub Subscription
	var kinds []string
	err := row.Scan(&sub.ID, &sub.Layer, &sub.Filter, &sub.Devices, &kinds, &sub.DwellSeconds, &sub.Webhook, &sub.CreatedAt, &sub.UpdatedAt)
	for _, k := range kinds {
		sub.Kinds = append(sub.Kinds, Kind(k))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Subscription{}, errNoSubscription
	}
	return sub, err
}

// errNoCaller refuses a subscription to a layer that runs as its caller
// made by a caller with no database role accepted; the gate refuses such
// a caller first.
var errNoCaller = apperr.InvalidField("The layer runs as its caller, under its table's row-level security, and this caller has no database role to watch it as.", "value_error", "body", "layer")

// check makes sure sub can be evaluated: its layer holds polygons and its
// filter fits the layer.
func (s *Service) check(ctx context.Context, sub Subscription) error {
	if !s.fences.Polygonal(sub.Layer) {
		return apperr.InvalidField("The layer is not a published polygon layer: GET /layers lists them.", "value_error", "body", "layer")
	}
	if s.fences.AsCaller(sub.Layer) {
		// Its fences are looked up as the owner, who sends the positions:
		// an owner with no role accepted could never be told of them.
		if c, err := s.caller(ctx, sub.Layer); err != nil || c == nil {
			return errNoCaller
		}
	}
	if sub.Filter == "" {
		return nil
	}
	err := s.filters.CheckFilter(ctx, sub.Layer, sub.Filter)
	if apperr.KindOf(err) == apperr.BadRequest {
		// A filter the layer cannot take is a field of the body that is
		// wrong, as every other field's problem is: a 422 that names it.
		return apperr.InvalidField(apperr.MessageOf(err), "value_error", "body", "filter")
	}
	return err
}

// CreateSubscription stores sub for owner and returns it with its id and
// its secret.
func (s *Service) CreateSubscription(ctx context.Context, owner string, sub Subscription) (Subscription, error) {
	if err := s.check(ctx, sub); err != nil {
		return Subscription{}, err
	}
	secret := newSecret()
	// The gate set the caller of a layer that runs as its caller; the
	// subscription itself is geogate's, written as the login role.
	ctx = pg.WithoutCaller(ctx)
	var out Subscription
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		var err error
		out, err = scanSubscription(conn.QueryRow(ctx, `
INSERT INTO event_subscriptions (owner, layer, filter, devices, kinds, dwell_ms, webhook, secret)
VALUES ($1, $2, nullif($3, ''), nullif($4::text[], '{}'), $5, nullif($6 * 1000, 0), nullif($7, ''), $8)
RETURNING `+subscriptionColumns, owner, sub.Layer, sub.Filter, sub.Devices, kindStrings(sub.Kinds), sub.DwellSeconds, sub.Webhook, secret))
		return err
	})
	out.Secret = secret
	return out, err
}

// Subscriptions lists owner's subscriptions, oldest first.
func (s *Service) Subscriptions(ctx context.Context, owner string) ([]Subscription, error) {
	out := []Subscription{}
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		rows, err := conn.Query(ctx, `SELECT `+subscriptionColumns+` FROM event_subscriptions WHERE owner = $1 ORDER BY created_at, id`, owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			sub, err := scanSubscription(rows)
			if err != nil {
				return err
			}
			out = append(out, sub)
		}
		return rows.Err()
	})
	return out, err
}

// Subscription returns owner's subscription id; another owner's is not
// found.
func (s *Service) Subscription(ctx context.Context, owner, id string) (Subscription, error) {
	if !outbox.ValidID(id) {
		return Subscription{}, errNoSubscription
	}
	var out Subscription
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		var err error
		out, err = scanSubscription(conn.QueryRow(ctx, `SELECT `+subscriptionColumns+` FROM event_subscriptions WHERE owner = $1 AND id = $2::uuid`, owner, id))
		return err
	})
	return out, err
}

// UpdateSubscription replaces what sub says of owner's subscription id.
// Stays already begun are kept: a device inside a fence that the new
// filter leaves out exits at its next position. Without a webhook, the
// events that waited for one are pulled instead; events made before a
// webhook was set stay pulled.
func (s *Service) UpdateSubscription(ctx context.Context, owner, id string, sub Subscription) (Subscription, error) {
	if !outbox.ValidID(id) {
		return Subscription{}, errNoSubscription
	}
	if err := s.check(ctx, sub); err != nil {
		return Subscription{}, err
	}
	ctx = pg.WithoutCaller(ctx) // as in CreateSubscription
	var out Subscription
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var old string
			if err := tx.QueryRow(ctx, `SELECT layer FROM event_subscriptions WHERE owner = $1 AND id = $2::uuid FOR UPDATE`, owner, id).Scan(&old); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return errNoSubscription
				}
				return err
			}
			if old != sub.Layer {
				// Another layer's fences: the old stays mean nothing.
				if _, err := tx.Exec(ctx, `DELETE FROM event_memberships WHERE subscription = $1::uuid`, id); err != nil {
					return err
				}
			}
			var err error
			out, err = scanSubscription(tx.QueryRow(ctx, `
UPDATE event_subscriptions SET layer = $3, filter = nullif($4, ''), devices = nullif($5::text[], '{}'), kinds = $6,
  dwell_ms = nullif($7 * 1000, 0), webhook = nullif($8, ''), updated_at = now()
WHERE owner = $1 AND id = $2::uuid
RETURNING `+subscriptionColumns, owner, id, sub.Layer, sub.Filter, sub.Devices, kindStrings(sub.Kinds), sub.DwellSeconds, sub.Webhook))
			if err != nil || sub.Webhook != "" {
				return err
			}
			// Pull only from now on: what waited for the webhook is
			// pulled too.
			return outbox.Unhook(ctx, tx, id)
		})
	})
	return out, err
}

// DeleteSubscription deletes owner's subscription id, its stays and its
// events, delivered or not: its events stop.
func (s *Service) DeleteSubscription(ctx context.Context, owner, id string) error {
	if !outbox.ValidID(id) {
		return errNoSubscription
	}
	var n int64
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		tag, err := conn.Exec(ctx, `DELETE FROM event_subscriptions WHERE owner = $1 AND id = $2::uuid`, owner, id)
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		return errNoSubscription
	}
	return err
}

// RotateSecret gives owner's subscription id a new secret and returns it.
// The old one keeps signing, beside the new, for grace, so that a
// receiver can switch without losing a delivery.
func (s *Service) RotateSecret(ctx context.Context, owner, id string, grace time.Duration) (Subscription, error) {
	if !outbox.ValidID(id) {
		return Subscription{}, errNoSubscription
	}
	secret := newSecret()
	// The gate set the caller of a layer that runs as its caller; the
	// subscription itself is geogate's, written as the login role.
	ctx = pg.WithoutCaller(ctx)
	var out Subscription
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		var err error
		out, err = scanSubscription(conn.QueryRow(ctx, `
UPDATE event_subscriptions SET previous_secret = secret, previous_until = now() + $4 * interval '1 millisecond',
  secret = $3, updated_at = now()
WHERE owner = $1 AND id = $2::uuid
RETURNING `+subscriptionColumns, owner, id, secret, grace.Milliseconds()))
		return err
	})
	out.Secret = secret
	return out, err
}

// newSecret is a fresh signing secret: 32 random bytes, written as the
// Standard Webhooks convention writes them.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func kindStrings(ks []Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}
