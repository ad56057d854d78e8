package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/admin"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/delivery"
	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/freshness"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/health"
	"github.com/geogate/geogate/internal/limits"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/rdb"
	"github.com/geogate/geogate/internal/tiles"
)

// services are what the routes are served by, each built once.
type services struct {
	registry *prometheus.Registry
	authn    *auth.Authenticator
	access   access.Settings
	gate     *gate.Gate
	limiter  *ratelimit.Limiter
	limits   *limits.Source
	// floors hold each identity's read floor; nil without replicas.
	floors   *freshness.Floors
	health   *health.Handler
	quotas   *limits.Quotas
	catalog  *catalog.Catalog
	layers   *catalog.Handler
	docs     *openapi.Docs
	geofence *geofence.Handler
	tiles    *tiles.Handler
	features *features.Handler
	events   *events.Handler
	// streams are the live event streams, ended when shutdown begins.
	streams *events.Hub
	admin   *admin.Handler
	// dead serves the dead letters of webhook delivery.
	dead *delivery.Handler
	// background is the work that must end before the clients close:
	// the delivery workers record their last outcomes.
	background sync.WaitGroup
}

// newServices builds every capability from the configuration and the
// shared clients. ctx ends when the service shuts down; background work
// started here (the JWKS refresh, the tile version listener, the
// limiter's pipeline senders) stops with it.
func newServices(ctx context.Context, cfg config.Config, log *slog.Logger, d deps) (*services, error) {
	s := &services{registry: prometheus.NewRegistry(), access: cfg.Access}
	s.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		pg.NewCollector(d.db),
		rdb.NewCollector(d.redis),
	)
	tileDB := d.db
	if d.tileDB != nil {
		tileDB = d.tileDB
		s.registry.MustRegister(pg.NewNamedCollector(tileDB, "tiles"))
	}
	bg := d.db
	if d.background != nil {
		bg = d.background
		s.registry.MustRegister(pg.NewNamedCollector(bg, "background"))
	}
	var err error
	if s.authn, err = auth.New(ctx, cfg.Auth, auth.Deps{DB: bg, Log: log, Registerer: s.registry, Replicas: d.replicas}); err != nil {
		return nil, err
	}
	s.limiter, err = ratelimit.New(d.redis, cfg.RateLimit, ratelimit.Options{
		Timeout: cfg.Redis.Timeout, Registerer: s.registry, Logger: log, Pipeline: cfg.Redis.Pipeline,
		TallyDays: cfg.Limits.TallyDays, TallyOf: isKeyIdentity,
	})
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, s.limiter.Close)
	s.gate = gate.New(s.access, s.limiter, log)
	s.gate.DBTime = dbTime
	s.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "geogate_gate_estimates",
		Help: "Kinds of request (route, policy, layers, size) the gate keeps an estimate of database time for.",
	}, func() float64 { return float64(s.gate.Estimates()) }))
	s.limits = limits.New(s.limiter, cfg.RateLimit, cfg.RateLimitVersion, limits.FromDB(bg, keyIdentity), log, s.registry)
	if err := s.limits.Reload(ctx); err != nil {
		log.Warn("rate-limit overrides not applied at start; retrying", "err", err.Error())
	}
	go s.limits.Run(ctx, limits.Listen(bg, log), cfg.Limits.Poll)
	// A key changed here is forgotten here before the answer; the other
	// replicas hear of it from the database (auth.KeyEvents).
	s.admin = admin.NewHandler(admin.New(bg, admin.Options{
		Policies: s.limits.Names, OnChange: s.authn.Forget, CheckWindows: s.limits.Check,
	}), s.limiter)
	if s.catalog, err = catalog.Open(ctx, bg, cfg.Catalog, log); err != nil {
		return nil, err
	}
	if err := pg.PrepareCallerRoles(ctx, bg, cfg.DB.Schema, cfg.Access.CallerRoles, log); err != nil {
		return nil, fmt.Errorf("DB_CALLER_ROLES: %w", err)
	}
	s.layers = catalog.NewHandler(s.catalog, s.gate)
	s.quotas = limits.NewQuotas(s.gate, s.access, s.limiter)
	s.health = health.New(cfg.Redis.Timeout*4, map[string]health.Check{
		"postgis": func(ctx context.Context) error { return bg.Ping(ctx) },
		"redis":   func(ctx context.Context) error { return d.redis.Ping(ctx).Err() },
	}, d.draining.Load)
	if d.replicas != nil {
		d.replicas.Register(s.registry)
		s.health.Also("replicas", func() any { return d.replicas.States() })
		s.floors = freshness.New(d.redis, 2*cfg.DB.ReplicaMaxLag+time.Second)
		go d.replicas.Run(ctx)
	}
	fair := newFairQueue(cfg.FairShare, s.registry)
	limits := cfg.Geofence.Rules.Limits
	limits.FeaturesDefaultLimit, limits.FeaturesMaxLimit = cfg.Features.DefaultLimit, cfg.Features.MaxLimit
	limits.EventsMaxBatch, limits.EventsMaxPage = cfg.Events.MaxBatch, cfg.Events.MaxPage
	if s.docs, err = openapi.New(limits); err != nil {
		return nil, err
	}
	tileSvc, err := tiles.New(ctx, pg.Runner{Pool: tileDB, Replicas: d.replicas, Queue: fair}, s.catalog, cfg.Tiles,
		tiles.Options{Redis: d.redis, Log: log, Registerer: s.registry})
	if err != nil {
		return nil, err
	}
	s.tiles = tiles.NewHandler(tileSvc, cfg.Tiles, tiles.Access{Gate: s.gate})
	// A fence write retires the tiles it changes before it answers.
	committed := func(ctx context.Context) {
		if err := tileSvc.Commit(ctx); err != nil {
			log.Warn("tile versions not published after a write", "err", err.Error())
		}
		s.floors.Wrote(ctx, d.replicas, log)
	}
	geo := geofence.New(pg.Runner{Pool: d.db, Replicas: d.replicas, Queue: fair}, s.catalog, cfg.Geofence, committed)
	s.geofence = geofence.NewHandler(geo, cfg.Geofence, geofence.Access{Gate: s.gate})
	fs := cfg.Features
	fs.Conformance = tiles.Conformance
	fs.LandingLinks = tiles.LandingLinks
	// A write that moves a watched fence tells its exits (events), whose
	// service reads the features' filters: the one is set once the other
	// exists, before anything is served.
	watch := &watchLater{}
	feat := features.New(pg.Runner{Pool: d.db, Replicas: d.replicas, Timeouts: cfg.Features.Timeouts, Queue: fair}, s.catalog, fs,
		features.Rights{Check: s.gate.Check, Committed: committed, Watch: watch})
	s.features = features.NewHandler(feat, fs, features.Access{Gate: s.gate, Registerer: s.registry})
	// Positions and subscriptions are written, and events read, on the
	// primary only: a report must see the stays the last one left.
	ev := events.New(pg.Runner{Pool: d.db, Timeouts: pg.Timeouts(cfg.Geofence.Timeouts), Queue: fair}, geo, feat,
		events.Rights{Access: s.gate.Check, Caller: s.gate.Caller}, cfg.Events.Settings, events.NewMetrics(s.registry))
	watch.Service = ev
	// One LISTEN per process wakes every live stream of events.
	listener := &pg.Listener{Pool: bg, Channels: []string{outbox.EventsChannel}, Log: log,
		Topic: "event stream (streams fall back to polling the outbox)"}
	s.streams = events.NewHub(func() { listener.Run(ctx) })
	listener.OnListen, listener.OnNotify = s.streams.WakeAll, s.streams.Notify
	s.events = events.NewHandler(ev, s.gate, cfg.Events.Rules, s.streams)
	s.dead = delivery.NewHandler(outbox.NewDeadLetters(pg.Runner{Pool: bg, Timeouts: pg.Timeouts(cfg.Geofence.Timeouts)}))
	// Every replica delivers: leases keep them from sending an event
	// twice at once, and the deliveries policy bounds each subscriber.
	worker := delivery.New(bg, cfg.Delivery, s.gate, delivery.NewMetrics(s.registry), log)
	s.background.Go(func() { worker.Run(ctx) })
	if keep := cfg.Events.Keep; keep != (events.Keep{}) {
		retention := events.NewRetention(bg, keep, 0, s.registry, log)
		s.background.Go(func() { retention.Run(ctx) })
	}
	return s, nil
}

// metrics serves the Prometheus registry.
func (s *services) metrics() gin.HandlerFunc {
	return gin.WrapH(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
}

// dbTime is the database time the request of ctx has used so far, as its
// meter (installed with its fair-share caller) has measured it.
func dbTime(ctx context.Context) time.Duration {
	if m := pg.MeterOf(ctx); m != nil {
		return m.DB()
	}
	return 0
}

// keyIdentity is the limiter's identity of API key id.
func keyIdentity(id string) string { return auth.Identity{Kind: auth.KindKey, ID: id}.LimitKey() }

// isKeyIdentity says whether a limiter identity is an API key's: those
// are tallied, for /admin/keys/{id}/usage.
func isKeyIdentity(identity string) bool { return strings.HasPrefix(identity, auth.KindKey+":") }

// watchLater is the events service, for the features service made before
// it.
type watchLater struct{ *events.Service }
