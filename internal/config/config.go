// Package config is geogate's one configuration struct, filled from the
// environment (and flags in cmd/api) and validated once at start-up. The
// README's settings table lists every variable read here.
package config

import (
	"errors"
	"strings"
	"time"
)

// Config is every setting of the service.
type Config struct {
	Server    Server
	DB        DB
	Redis     Redis
	Auth      Auth
	RateLimit RateLimit
	Geofence  Geofence
	Tiles     Tiles
}

// Server holds HTTP and process settings.
type Server struct {
	Port            int
	LogLevel        string
	ReadTimeout     time.Duration
	WriteTimeout    time.Duration
	IdleTimeout     time.Duration
	ShutdownTimeout time.Duration
	ShutdownDrain   time.Duration
	StartupTimeout  time.Duration
	MaxHeaderBytes  int
	CORSOrigins     []string
}

// DB holds PostgreSQL settings.
type DB struct {
	URL            string
	MaxConns       int
	MinConns       int
	AcquireTimeout time.Duration
	QueryTimeout   time.Duration
	MigrateOnStart bool
}

// Redis holds Redis settings.
type Redis struct {
	URL     string
	Timeout time.Duration
	// Pipeline is how many concurrent rate-limit decisions may share one
	// round trip; 1 sends each on its own.
	Pipeline int
}

// Load reads every setting through getenv. The error names each bad
// setting.
func Load(getenv func(string) string) (Config, error) {
	r := &reader{getenv: getenv}
	var c Config
	c.Server = Server{
		Port:            r.integer("PORT", 8000, 1, 65535),
		LogLevel:        r.str("LOG_LEVEL", "info"),
		ReadTimeout:     r.duration("HTTP_READ_TIMEOUT", 15*time.Second),
		WriteTimeout:    r.duration("HTTP_WRITE_TIMEOUT", 30*time.Second),
		IdleTimeout:     r.duration("HTTP_IDLE_TIMEOUT", 120*time.Second),
		ShutdownTimeout: r.duration("SHUTDOWN_TIMEOUT", 15*time.Second),
		ShutdownDrain:   r.durationOrZero("SHUTDOWN_DRAIN", 0),
		StartupTimeout:  r.duration("STARTUP_TIMEOUT", 10*time.Second),
		MaxHeaderBytes:  r.integer("HTTP_MAX_HEADER_BYTES", 16<<10, 1<<10, 1<<20),
		CORSOrigins:     r.list("CORS_ORIGINS", nil),
	}
	switch c.Server.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		r.fail("LOG_LEVEL", c.Server.LogLevel, "must be debug, info, warn or error")
	}
	c.DB = DB{
		URL:            r.str("DATABASE_URL", ""),
		MaxConns:       r.integer("DB_MAX_CONNS", 20, 1, 1000),
		MinConns:       r.integer("DB_MIN_CONNS", 5, 0, 1000),
		AcquireTimeout: r.duration("DB_ACQUIRE_TIMEOUT", time.Second),
		QueryTimeout:   r.duration("DB_QUERY_TIMEOUT", 2*time.Second),
		MigrateOnStart: r.boolean("MIGRATE_ON_START", true),
	}
	if c.DB.URL == "" {
		r.fail("DATABASE_URL", "", "is required, for example postgres://user@localhost:5432/geogate")
	} else {
		r.urlWithScheme("DATABASE_URL", c.DB.URL, "postgres", "postgresql")
	}
	c.Redis = Redis{
		URL:      r.str("REDIS_URL", ""),
		Timeout:  r.duration("REDIS_TIMEOUT", 250*time.Millisecond),
		Pipeline: r.integer("REDIS_PIPELINE", 16, 1, 1024),
	}
	if c.Redis.URL == "" {
		r.fail("REDIS_URL", "", "is required, for example redis://localhost:6379/0")
	} else {
		r.urlWithScheme("REDIS_URL", c.Redis.URL, "redis", "rediss", "redis-cluster", "rediss-cluster", "redis-sentinel", "rediss-sentinel")
	}
	c.Auth = loadAuth(r)
	c.RateLimit = loadRateLimit(r)
	c.Geofence = loadGeofence(r)
	c.Tiles = loadTiles(r)
	if len(r.errs) > 0 {
		return c, errors.New("bad configuration:\n  " + strings.Join(r.errs, "\n  "))
	}
	return c, nil
}
