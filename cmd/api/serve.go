package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/rdb"
)

// listeningPrefix starts the line api serve prints on stdout once it
// accepts connections, followed by the service's base URL.
const listeningPrefix = "geogate listening on "

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", -1, "port to listen on, 0 for a free one (overrides PORT)")
	noMigrate := fs.Bool("no-migrate", false, "do not apply migrations at start (overrides MIGRATE_ON_START)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(getenv, config.NeedPostgres, config.NeedRedis)
	if err != nil {
		return err
	}
	if *port >= 0 {
		cfg.Server.Port = *port
	}
	if *noMigrate {
		cfg.DB.MigrateOnStart = false
	}
	if cfg.Server.GCPercent > 0 {
		debug.SetGCPercent(cfg.Server.GCPercent)
	}
	log := newLogger(stderr, cfg.Server)
	rdb.SetLogger(log)
	if cfg.Server.PprofAddr != "" {
		stopPprof, err := startPprof(cfg.Server.PprofAddr, log, stdout)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	deps, closeDeps, err := openDeps(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDeps()

	hctx, stopHandler := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHandler()
	services, err := newServices(hctx, cfg, log, deps)
	if err != nil {
		return err
	}
	handler, err := newRouter(cfg, log, services, routes(services))
	if err != nil {
		return err
	}
	go refreshOnHangup(hctx, services, getenv, log)
	srv := &http.Server{
		Handler:           httpx.Guard(handler, log),
		ReadHeaderTimeout: cfg.Server.ReadTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		WriteTimeout:      cfg.Server.WriteTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Live event streams would hold their connections open until the
	// shutdown timeout: they end as soon as shutdown begins, and their
	// clients reconnect to another replica.
	srv.RegisterOnShutdown(services.streams.Stop)
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Server.Port)))
	if err != nil {
		return fmt.Errorf("listen on port %d: %w", cfg.Server.Port, err)
	}
	// With PORT=0 the system picks the port. The line on stdout, printed
	// at any LOG_LEVEL, is how a caller (a test, a script) learns it.
	url := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	log.Info("listening", "url", url)
	fmt.Fprintln(stdout, listeningPrefix+url)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// First /readyz fails for SHUTDOWN_DRAIN while requests are still
	// served, so a balancer can take this replica out; then in-flight
	// requests finish and new connections are refused.
	deps.draining.Store(true)
	if d := cfg.Server.ShutdownDrain; d > 0 {
		log.Info("draining", "for", d.String())
		time.Sleep(d)
	}
	log.Info("shutting down", "timeout", cfg.Server.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Server.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	// Background work ends before the clients it uses close.
	stopHandler()
	services.background.Wait()
	log.Info("stopped")
	return nil
}

// deps are the shared clients every capability is built from.
type deps struct {
	db pgPool
	// tileDB is the pool tiles render on; nil means db.
	tileDB pgPool
	// background is the pool of the work that is no request's query
	// (DB_BACKGROUND_CONNS); nil means db.
	background pgPool
	redis      redisClient
	// replicas route reads to DATABASE_REPLICA_URLS; nil without them.
	replicas *pg.Replicas
	// draining turns true when shutdown begins; /readyz then fails.
	draining *atomic.Bool
}

// openDeps connects to PostgreSQL and Redis within the start-up timeout,
// applies migrations when configured, and returns a func that closes both.
func openDeps(ctx context.Context, cfg config.Config, log *slog.Logger) (deps, func(), error) {
	sctx, cancel := context.WithTimeout(ctx, cfg.Server.StartupTimeout)
	defer cancel()
	// Every statement is planned once per connection: planning a /within
	// statement anew costs more than running it for a small radius, and
	// its generic plan serves every radius as well (TestWithinPlannedOnce).
	opts := pg.Options{MaxConns: int32(cfg.DB.MaxConns), MinConns: int32(cfg.DB.MinConns),
		AppName: "geogate", StatementTimeout: cfg.DB.StatementTimeout, Warm: pg.WarmPostGIS, Schema: cfg.DB.Schema,
		GenericPlans: true}
	pool, err := pg.Open(sctx, cfg.DB.URL, opts)
	if err != nil {
		return deps{}, nil, err
	}
	if cfg.DB.MigrateOnStart {
		if err := migrateOnStart(sctx, cfg.DB.URL, migrationSchemas(cfg), log); err != nil {
			pool.Close()
			return deps{}, nil, err
		}
	}
	// Tiles render on connections of their own, so that a burst of map
	// traffic cannot take the connections /within needs.
	tileOpts := opts
	tileOpts.MaxConns = int32(cfg.DB.TileMaxConns)
	tileOpts.MinConns = min(2, tileOpts.MaxConns)
	tileOpts.AppName = "geogate-tiles"
	tileOpts.GenericPlans = true
	tilePool, err := pg.Open(sctx, cfg.DB.URL, tileOpts)
	if err != nil {
		pool.Close()
		return deps{}, nil, err
	}
	// Listeners, key look-ups, the catalog, administration, delivery and
	// retention take connections of their own, so that every connection
	// of the serving pool is one the fair queue's slots can count on.
	bgOpts := pg.Options{MaxConns: int32(cfg.DB.BackgroundConns), AppName: "geogate-background",
		StatementTimeout: cfg.DB.StatementTimeout, Schema: cfg.DB.Schema}
	bgPool, err := pg.Open(sctx, cfg.DB.URL, bgOpts)
	if err != nil {
		tilePool.Close()
		pool.Close()
		return deps{}, nil, err
	}
	rc, err := rdb.Open(sctx, cfg.Redis.URL, cfg.Redis.Timeout)
	if err != nil {
		bgPool.Close()
		tilePool.Close()
		pool.Close()
		return deps{}, nil, err
	}
	replicaPools, names, err := openReplicas(sctx, cfg, opts)
	if err != nil {
		_ = rc.Close()
		bgPool.Close()
		tilePool.Close()
		pool.Close()
		return deps{}, nil, err
	}
	closeAll := func() {
		for _, p := range replicaPools {
			p.Close()
		}
		_ = rc.Close()
		bgPool.Close()
		tilePool.Close()
		pool.Close()
	}
	d := deps{db: pool, tileDB: tilePool, background: bgPool, redis: rc, draining: new(atomic.Bool)}
	if len(replicaPools) > 0 {
		d.replicas = pg.NewReplicas(pool, replicaPools, names, pg.ReplicaOptions{
			MaxLag: cfg.DB.ReplicaMaxLag, Check: cfg.DB.ReplicaCheck, Log: log,
		})
	}
	return d, closeAll, nil
}

// openReplicas opens a pool per DATABASE_REPLICA_URLS entry, each named
// host:port, without waiting for the replicas: one that is down at start
// gets reads once its checks find it healthy.
func openReplicas(ctx context.Context, cfg config.Config, opts pg.Options) ([]pgPool, []string, error) {
	opts.Lazy, opts.AppName, opts.MinConns = true, "geogate-replica", 0
	var pools []pgPool
	var names []string
	for _, u := range cfg.DB.ReplicaURLs {
		p, err := pg.Open(ctx, u, opts)
		if err != nil {
			for _, q := range pools {
				q.Close()
			}
			return nil, nil, fmt.Errorf("replica: %w", err)
		}
		c := p.Config().ConnConfig
		pools, names = append(pools, p), append(names, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))))
	}
	return pools, names, nil
}

// migrateOnStart applies migrations through a short-lived pool of its own:
// a migration may run longer than the serving pool's statement_timeout,
// and keeps the server's search_path.
func migrateOnStart(ctx context.Context, url string, schemas pg.Schemas, log *slog.Logger) error {
	pool, err := pg.Open(ctx, url, pg.Options{MaxConns: 2, AppName: "geogate-migrate"})
	if err != nil {
		return err
	}
	defer pool.Close()
	return pg.Migrate(ctx, pool, schemas, log)
}

// refreshOnHangup, on each SIGHUP until ctx ends, re-reads the rate-limit
// policy file and looks for changed layers at once rather than at the next
// PUBLISH_REFRESH.
func refreshOnHangup(ctx context.Context, s *services, getenv func(string) string, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		reloadPolicies(s, getenv, log)
		changed, err := s.catalog.Refresh(ctx)
		if err != nil {
			log.Warn("layers not refreshed after SIGHUP", "err", err.Error())
			continue
		}
		log.Info("layers refreshed after SIGHUP", "changed", changed)
	}
}

// reloadPolicies reads the rate-limit policies again and puts them in
// force; a file that cannot be read or is invalid leaves the running ones.
func reloadPolicies(s *services, getenv func(string) string, log *slog.Logger) {
	ps, version, err := config.LoadRateLimit(getenv)
	if err == nil {
		err = s.limits.SetBase(ps, version)
	} else {
		s.limits.Refused()
	}
	if err != nil {
		log.Error("rate-limit policies not reloaded; the running ones stay", "version", s.limits.Version(), "err", err.Error())
		return
	}
	log.Info("rate-limit policies reloaded", "version", version)
}
