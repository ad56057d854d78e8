// Package config reads geogate's settings from the environment (and the
// files it names), validates them once at start-up and fills the settings
// types each package owns: auth.Settings, ratelimit policies,
// geofence.Settings, tiles.Settings. No other package reads the
// environment. docs/configuration.md lists every variable read here.
package config

import (
	"errors"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/delivery"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/tiles"
	"github.com/geogate/geogate/internal/webhook"
)

// Config is every setting of the service and its commands.
type Config struct {
	Server Server
	DB     DB
	Redis  Redis
	Auth   auth.Settings
	// RateLimit holds the named policies.
	RateLimit map[string]ratelimit.Policy
	// RateLimitVersion names the policies' source: "builtin" without a
	// policy file, else a digest of the file's bytes.
	RateLimitVersion string
	// Limits are the settings of policy changes while running.
	Limits   Limits
	Geofence geofence.Settings
	Tiles    tiles.Settings
	Features features.Settings
	// Catalog says which tables and views are published.
	Catalog catalog.Settings
	// Access holds who may read each layer and what it costs.
	Access access.Settings
	// FairShare is the queue that shares a busy database among callers.
	FairShare FairShare
	// Events are the settings of positions and geofence events.
	Events Events
	// Delivery sends geofence events to their webhooks.
	Delivery delivery.Settings
}

// Server holds HTTP and process settings.
type Server struct {
	// Port is the HTTP port; 0 picks a free one (logged at start).
	Port     int
	LogLevel string
	// LogFormat is "text", "json" or "auto" (text when stderr is a
	// terminal, JSON otherwise).
	LogFormat       string
	ReadTimeout     time.Duration
	WriteTimeout    time.Duration
	IdleTimeout     time.Duration
	ShutdownTimeout time.Duration
	ShutdownDrain   time.Duration
	StartupTimeout  time.Duration
	MaxHeaderBytes  int
	CORSOrigins     []string
	// PprofAddr, when set, is the host:port of a separate listener
	// serving net/http/pprof; empty means no profiling endpoint.
	PprofAddr string
	// GCPercent is the garbage collector's target that serve sets: 400
	// when GOGC is not set, 0 (leave the runtime's reading of GOGC)
	// when it is.
	GCPercent int
	// TrustedProxies are the proxies whose X-Forwarded-For, X-Real-IP,
	// X-Forwarded-Proto and X-Forwarded-Host headers are believed.
	TrustedProxies httpx.TrustedProxies
}

// DB holds PostgreSQL settings.
type DB struct {
	URL string
	// Schema holds geogate's own tables (API keys, tile versions,
	// migration history); it is never published.
	Schema   string
	MaxConns int
	MinConns int
	// TileMaxConns bounds the pool tiles render on, apart from the one
	// every other query uses.
	TileMaxConns int
	// BackgroundConns bounds the pool of the work that is no request's
	// query: listeners, key look-ups, the catalog, administration, webhook
	// delivery and retention. The serving pool is then the fair queue's
	// alone.
	BackgroundConns int
	AcquireTimeout  time.Duration
	QueryTimeout    time.Duration
	// StatementTimeout is the server-side statement_timeout of the
	// serving pool's connections: a backstop that ends a statement whose
	// cancel request was lost. 0 leaves the server's default.
	StatementTimeout time.Duration
	MigrateOnStart   bool
	// ReplicaURLs are streaming replicas that take reads; ReplicaMaxLag
	// is how old their data may be for them to get reads, and
	// ReplicaCheck how often each is checked.
	ReplicaURLs   []string
	ReplicaMaxLag time.Duration
	ReplicaCheck  time.Duration
}

// cancelGrace is how far the statement_timeout backstop sits, by default,
// above the longest client-side deadline of a query.
const cancelGrace = 2 * time.Second

// Redis holds Redis settings.
type Redis struct {
	URL     string
	Timeout time.Duration
	// Pipeline is how many concurrent rate-limit decisions may share one
	// round trip; 1 sends each on its own.
	Pipeline int
}

// Need names a server a command cannot work without.
type Need int

// The servers a command may need.
const (
	NeedPostgres Need = iota + 1
	NeedRedis
)

// DefaultGCPercent is the collector's target when GOGC is not set. Go's
// own default of 100 collects every time the heap doubles; a request
// allocates most of what it touches, so on a small machine the collector
// took about a quarter of the service's CPU, and its idle-time workers
// ran on cores PostgreSQL was waiting for.
const DefaultGCPercent = 400

func gcPercent(gogc string) int {
	if gogc != "" {
		return 0 // the Go runtime read it at start
	}
	return DefaultGCPercent
}

// Load reads every setting through getenv; the URLs of the servers in
// needs are required. The error names each bad setting.
func Load(getenv func(string) string, needs ...Need) (Config, error) {
	r := &reader{getenv: getenv}
	var c Config
	c.Server = Server{
		Port:            r.integer("PORT", 8000, 0, 65535),
		LogLevel:        r.str("LOG_LEVEL", "info"),
		LogFormat:       r.str("LOG_FORMAT", "auto"),
		ReadTimeout:     r.duration("HTTP_READ_TIMEOUT", 15*time.Second),
		WriteTimeout:    r.duration("HTTP_WRITE_TIMEOUT", 30*time.Second),
		IdleTimeout:     r.duration("HTTP_IDLE_TIMEOUT", 120*time.Second),
		ShutdownTimeout: r.duration("SHUTDOWN_TIMEOUT", 15*time.Second),
		ShutdownDrain:   r.durationOrZero("SHUTDOWN_DRAIN", 0),
		StartupTimeout:  r.duration("STARTUP_TIMEOUT", 10*time.Second),
		MaxHeaderBytes:  r.integer("HTTP_MAX_HEADER_BYTES", 16<<10, 1<<10, 1<<20),
		CORSOrigins:     r.list("CORS_ORIGINS", nil),
		PprofAddr:       r.str("PPROF_ADDR", ""),
		GCPercent:       gcPercent(r.str("GOGC", "")),
	}
	if c.Server.PprofAddr != "" {
		checkListenAddr(r, "PPROF_ADDR", c.Server.PprofAddr)
	}
	switch c.Server.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		r.fail("LOG_LEVEL", c.Server.LogLevel, "must be debug, info, warn or error")
	}
	switch c.Server.LogFormat {
	case "auto", "text", "json":
	default:
		r.fail("LOG_FORMAT", c.Server.LogFormat, "must be auto, text or json")
	}
	c.Server.TrustedProxies = loadTrustedProxies(r)
	c.DB = DB{
		URL:             r.str("DATABASE_URL", ""),
		MaxConns:        r.integer("DB_MAX_CONNS", 20, 1, 1000),
		MinConns:        r.integer("DB_MIN_CONNS", 5, 0, 1000),
		TileMaxConns:    r.integer("TILES_DB_MAX_CONNS", 10, 1, 1000),
		BackgroundConns: r.integer("DB_BACKGROUND_CONNS", 8, 2, 1000),
		AcquireTimeout:  r.duration("DB_ACQUIRE_TIMEOUT", time.Second),
		QueryTimeout:    r.duration("DB_QUERY_TIMEOUT", 2*time.Second),
		MigrateOnStart:  r.boolean("MIGRATE_ON_START", true),
		Schema:          r.str("GEOGATE_SCHEMA", pg.DefaultSchema),
		ReplicaURLs:     r.list("DATABASE_REPLICA_URLS", nil),
		ReplicaMaxLag:   r.duration("DB_REPLICA_MAX_LAG", time.Second),
		ReplicaCheck:    r.duration("DB_REPLICA_CHECK", 200*time.Millisecond),
	}
	for _, u := range c.DB.ReplicaURLs {
		r.urlWithScheme("DATABASE_REPLICA_URLS", u, "postgres", "postgresql")
	}
	if c.DB.ReplicaCheck > c.DB.ReplicaMaxLag {
		r.fail("DB_REPLICA_CHECK", c.DB.ReplicaCheck.String(), "must be at most DB_REPLICA_MAX_LAG ("+c.DB.ReplicaMaxLag.String()+"): a replica is known no better than its last check")
	}
	if !layerName.MatchString(c.DB.Schema) {
		r.fail("GEOGATE_SCHEMA", c.DB.Schema, "must be a lower-case SQL identifier: letters, digits and _")
	}
	switch {
	case c.DB.URL == "" && slices.Contains(needs, NeedPostgres):
		r.fail("DATABASE_URL", "", "is required, for example postgres://user@localhost:5432/geogate")
	case c.DB.URL != "":
		r.urlWithScheme("DATABASE_URL", c.DB.URL, "postgres", "postgresql")
	}
	c.Redis = Redis{
		URL:      r.str("REDIS_URL", ""),
		Timeout:  r.duration("REDIS_TIMEOUT", 250*time.Millisecond),
		Pipeline: r.integer("REDIS_PIPELINE", 16, 1, 1024),
	}
	switch {
	case c.Redis.URL == "" && slices.Contains(needs, NeedRedis):
		r.fail("REDIS_URL", "", "is required, for example redis://localhost:6379/0")
	case c.Redis.URL != "":
		r.urlWithScheme("REDIS_URL", c.Redis.URL, "redis", "rediss", "redis-cluster", "rediss-cluster", "redis-sentinel", "rediss-sentinel", "unix")
	}
	c.Auth = loadAuth(r, c.DB)
	c.RateLimit, c.RateLimitVersion = loadRateLimit(r)
	c.Limits = loadLimits(r)
	layers := loadLayers(r, policyNames(c.RateLimit))
	c.Catalog = loadCatalog(r, c.DB, layers.catalog)
	c.Access = access.Settings{Layers: layers.access, CallerRoles: loadCallerRoles(r, layers.access)}
	c.Geofence = loadGeofence(r, c.DB)
	c.Tiles = loadTiles(r, c.Redis, c.DB, layers.tiles)
	c.Features = loadFeatures(r, c.DB, c.Tiles.PublicURL)
	c.DB.StatementTimeout = loadStatementTimeout(r, max(c.DB.QueryTimeout, c.Tiles.RenderTimeout))
	c.FairShare = loadFairShare(r, c.DB)
	// Where webhooks may point is read once: subscriptions are checked
	// by it when written, deliveries when they connect.
	hooks := webhook.Rules{
		AllowHTTP:    r.boolean("EVENTS_ALLOW_HTTP_WEBHOOKS", false),
		AllowPrivate: r.boolean("EVENTS_ALLOW_PRIVATE_WEBHOOKS", false),
	}
	c.Events = loadEvents(r, hooks)
	c.Delivery = loadDelivery(r, hooks)
	if len(r.errs) > 0 {
		return c, errors.New("bad configuration:\n  " + strings.Join(r.errs, "\n  "))
	}
	return c, nil
}

// loadStatementTimeout reads DB_STATEMENT_TIMEOUT: by default longest (the
// longest client-side query deadline) plus cancelGrace; 0 turns it off;
// anything else must leave every query its full deadline.
func loadStatementTimeout(r *reader, longest time.Duration) time.Duration {
	d := r.durationOrZero("DB_STATEMENT_TIMEOUT", longest+cancelGrace)
	if d > 0 && d < longest {
		r.fail("DB_STATEMENT_TIMEOUT", d.String(), "must be 0 (off) or at least the longest query deadline, "+
			"the larger of DB_QUERY_TIMEOUT and TILES_RENDER_TIMEOUT ("+longest.String()+")")
		return longest + cancelGrace
	}
	return d
}

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$`)

// checkListenAddr checks that v is host:port with a port from 0 to 65535
// and a host that is empty (every interface), an IP address or a name.
func checkListenAddr(r *reader, name, v string) {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		r.fail(name, v, "not host:port, for example 127.0.0.1:6060")
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		r.fail(name, v, "the port must be a number between 0 (any free port) and 65535, for example 127.0.0.1:6060")
		return
	}
	if host != "" && net.ParseIP(host) == nil && !hostName.MatchString(host) {
		r.fail(name, v, "the host must be an IP address or a host name, for example 127.0.0.1:6060")
	}
}

// policyNames are the names of the rate-limit policies, sorted.
func policyNames(ps map[string]ratelimit.Policy) []string {
	names := make([]string, 0, len(ps))
	for name := range ps {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
