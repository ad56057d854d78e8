package delivery_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/delivery"
	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
	"github.com/geogate/geogate/internal/webhook"
)

// quick are settings for tests: short waits everywhere.
var quick = delivery.Settings{
	Workers: 8, PerSubscription: 4,
	Timeout: 2 * time.Second, Lease: 3 * time.Second,
	RetryFor: time.Minute, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	Poll: 100 * time.Millisecond, Policy: "deliveries",
	Webhooks: webhook.Rules{AllowPrivate: true}, // the receivers listen on this machine
}

// fixture is a database with the demo fences and an events service.
type fixture struct {
	pool *pgxpool.Pool
	svc  *events.Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	cat, err := catalog.Open(ctx, pool, catalog.Settings{Schemas: []string{"public"}, Own: pg.DefaultSchema}, nil)
	if err != nil {
		t.Fatalf("catalog.Open() = %v", err)
	}
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: 30 * time.Second, AcquireTimeout: 10 * time.Second}}
	geo := geofence.New(run, cat, geofence.Settings{Own: pg.DefaultSchema}, nil)
	fs := features.New(run, cat, features.Settings{}, features.Rights{})
	allow := func(context.Context, string) error { return nil }
	svc := events.New(run, geo, fs, events.Rights{Access: allow}, events.Settings{MaxBatch: 1000, MaxSkew: 5 * time.Minute, MaxPage: 1000}, nil)
	return &fixture{pool: pool, svc: svc}
}

// subscribe makes owner a subscription to the demo fences' enters and
// exits, delivered to webhook.
func (f *fixture) subscribe(t *testing.T, owner, webhook string) events.Subscription {
	t.Helper()
	sub, err := f.svc.CreateSubscription(context.Background(), owner, events.Subscription{
		Layer: "geofences", Kinds: []events.Kind{events.Enter, events.Exit}, Webhook: webhook})
	if err != nil {
		t.Fatalf("CreateSubscription() = %v", err)
	}
	return sub
}

// Paris and Brussels: a device going back and forth between them exits
// one country and enters the other at every step.
var paris, brussels = [2]float64{2.35, 48.86}, [2]float64{4.35, 50.85}

// shuttle reports, for each device, steps positions alternating between
// Paris and Brussels, and returns the number of events they make: one
// enter at the first position, then an exit and an enter per step.
func (f *fixture) shuttle(t *testing.T, owner string, devices []string, steps int) int {
	t.Helper()
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	var ps []events.Position
	for i := range steps {
		p := paris
		if i%2 == 1 {
			p = brussels
		}
		for _, d := range devices {
			ps = append(ps, events.Position{Device: d, Time: start.Add(time.Duration(i) * time.Second), Lng: p[0], Lat: p[1]})
		}
	}
	if _, err := f.svc.Report(context.Background(), owner, ps); err != nil {
		t.Fatalf("Report() = %v", err)
	}
	return len(devices) * (1 + 2*(steps-1))
}

// run starts a worker on pool until the test ends.
func run(t *testing.T, pool *pgxpool.Pool, s delivery.Settings, g delivery.Gate, m *delivery.Metrics) {
	t.Helper()
	w := delivery.New(pool, s, g, m, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// runner runs the dead letters' statements on the fixture's pool.
func runner(f *fixture) pg.Runner {
	return pg.Runner{Pool: f.pool, Timeouts: pg.Timeouts{QueryTimeout: 10 * time.Second, AcquireTimeout: 10 * time.Second}}
}

// states counts the events of sub by delivery state.
func (f *fixture) states(t *testing.T, sub string) map[string]int {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT state, count(*) FROM events WHERE subscription = $1::uuid GROUP BY state`, sub)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitState waits until n events of sub are in state.
func (f *fixture) waitState(t *testing.T, sub, state string, n int, within time.Duration) {
	t.Helper()
	testenv.WaitFor(t, within, fmt.Sprintf("%d events %s", n, state), func() bool { return f.states(t, sub)[state] == n })
}

// delivery is one request a receiver got.
type got struct {
	ID     string
	Seq    int64
	Device string
	At     time.Time
}

// receiver is a webhook that checks every request's signature against
// the secrets it is given and records what it got. answer decides each
// answer (nil: 204).
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	secrets []string
	// want is how many signatures each request must carry.
	want   int
	answer func(w http.ResponseWriter, r *http.Request, g got, attempt int) bool

	mu       sync.Mutex
	requests []got
	accepted map[string]int // answered 2xx, per event id
	tries    map[string]int
	inFlight map[string]bool
	errs     []string
}

func newReceiver(t *testing.T) *receiver { return newReceiverOn(t, nil, nil) }

// newReceiverOn is newReceiver listening on ln (nil: a free port) and
// checking secrets from its first request.
func newReceiverOn(t *testing.T, ln net.Listener, secrets []string) *receiver {
	r := &receiver{t: t, want: 1, secrets: secrets, accepted: map[string]int{}, tries: map[string]int{}, inFlight: map[string]bool{}}
	r.srv = httptest.NewUnstartedServer(r)
	if ln != nil {
		r.srv.Listener.Close()
		r.srv.Listener = ln
	}
	r.srv.Start()
	t.Cleanup(r.close)
	t.Cleanup(r.check)
	return r
}

func (r *receiver) url() string { return r.srv.URL + "/hook" }

func (r *receiver) close() { r.srv.Close() }

func (r *receiver) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// check fails the test for anything wrong the receiver saw.
func (r *receiver) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		r.t.Error(e)
	}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	g, ok := r.verify(req, body)
	if !ok {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	if r.inFlight[g.ID] {
		r.errs = append(r.errs, "event "+g.ID+" sent again while its first request was open")
	}
	r.inFlight[g.ID] = true
	r.tries[g.ID]++
	attempt := r.tries[g.ID]
	r.mu.Unlock()
	accepted := true
	if r.answer != nil {
		accepted = r.answer(w, req, g, attempt)
	} else {
		w.WriteHeader(http.StatusNoContent)
	}
	r.mu.Lock()
	delete(r.inFlight, g.ID)
	if accepted && req.Context().Err() == nil {
		r.accepted[g.ID]++
		r.requests = append(r.requests, g)
	}
	r.mu.Unlock()
}

// verify checks the request as a receiver following the documentation
// would, independently of the package's signing code.
func (r *receiver) verify(req *http.Request, body []byte) (got, bool) {
	id, ts := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp")
	if ct := req.Header.Get("Content-Type"); ct != "application/cloudevents+json" {
		r.fail("Content-Type %q", ct)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		r.fail("webhook-timestamp %q is not now", ts)
		return got{}, false
	}
	sigs := strings.Fields(req.Header.Get("webhook-signature"))
	if len(sigs) != r.want {
		r.fail("%d signatures %q, want %d", len(sigs), sigs, r.want)
	}
	for _, secret := range r.secrets {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		found := false
		for _, s := range sigs {
			found = found || hmac.Equal([]byte(s), []byte(want))
		}
		if !found {
			r.fail("event %s: no signature by secret %.12s… among %q", id, secret, sigs)
			return got{}, false
		}
	}
	var ce outbox.CloudEvent
	if err := json.Unmarshal(body, &ce); err != nil || ce.ID != id || ce.SpecVersion != "1.0" {
		r.fail("body %.200s is not the CloudEvent %s: %v", body, id, err)
		return got{}, false
	}
	seq, _ := strconv.ParseInt(ce.Sequence, 10, 64)
	return got{ID: id, Seq: seq, Device: ce.Subject, At: time.Now()}, true
}

// snapshot returns the accepted requests in the order they were answered
// and the acceptances per id.
func (r *receiver) snapshot() ([]got, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := make(map[string]int, len(r.accepted))
	for k, v := range r.accepted {
		counts[k] = v
	}
	return append([]got(nil), r.requests...), counts
}

// attempts returns how many requests event id got.
func (r *receiver) attempts(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries[id]
}

// eventIDs lists the ids of sub's events, in order.
func (f *fixture) eventIDs(t *testing.T, sub string) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT id::text FROM events WHERE subscription = $1::uuid ORDER BY seq`, sub)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkAllInOrder fails unless every event of sub was accepted and each
// device's events were accepted in their order.
func (f *fixture) checkAllInOrder(t *testing.T, r *receiver, sub string) {
	t.Helper()
	reqs, counts := r.snapshot()
	ids := f.eventIDs(t, sub)
	for _, id := range ids {
		if counts[id] == 0 {
			t.Errorf("event %s never accepted", id)
		}
	}
	last := map[string]int64{}
	for _, g := range reqs {
		if g.Seq < last[g.Device] {
			t.Errorf("device %s: event %d accepted after %d", g.Device, g.Seq, last[g.Device])
		}
		last[g.Device] = max(last[g.Device], g.Seq)
	}
	if len(ids) == 0 {
		t.Error("no events made; the test drives nothing")
	}
}
