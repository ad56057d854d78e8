package outbox

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// Entry is an event to append.
type Entry struct {
	Subscription, Device, Layer, Fence, Kind string
	Time                                     time.Time
	Lng, Lat                                 float64
	// Cause is "position" when empty.
	Cause string
}

// Lock queues, in b, taking the outbox lock of each subscription in subs
// until the transaction ends. Every writer of a subscription's events
// takes its lock first, in one order (outbox_lock), so a writer that
// holds it sees every event and deletion committed before, and events
// are numbered in the order their transactions commit: a reader that has
// seen event n of a subscription never later finds one below n. A
// transaction that changes what a subscription's events depend on (its
// stays) takes the lock too.
func Lock(b *pgx.Batch, subs []string) {
	b.Queue(`SELECT outbox_lock($1::text[])`, subs)
}

// Append queues, in b, appending es in their order under their
// subscriptions' locks, leaving out those of subscriptions deleted since
// and of kinds their subscription no longer asks for; each is pending
// delivery when its subscription has a webhook, and pulled otherwise.
// When b's results are read, *n is how many were written.
func Append(b *pgx.Batch, es []Entry, n *int64) {
	k := len(es)
	subs, devs, layers, fences, kinds, causes := make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	at, lng, lat := make([]time.Time, k), make([]float64, k), make([]float64, k)
	for i, e := range es {
		subs[i], devs[i], layers[i], fences[i], kinds[i] = e.Subscription, e.Device, e.Layer, e.Fence, e.Kind
		at[i], lng[i], lat[i], causes[i] = e.Time, e.Lng, e.Lat, e.Cause
		if causes[i] == "" {
			causes[i] = "position"
		}
	}
	b.Queue(`SELECT outbox_append($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::float8[], $8::float8[], $9::text[])`,
		subs, devs, layers, fences, kinds, at, lng, lat, causes).QueryRow(func(row pgx.Row) error {
		return row.Scan(n)
	})
}
