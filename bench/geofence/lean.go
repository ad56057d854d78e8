package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/ratelimit"
)

// floorBody is what the floor handler answers: about the size of a 1 km
// /within answer.
var floorBody = []byte(`{"type":"FeatureCollection","features":[{"type":"Feature","id":1,"geometry":{"type":"Point","coordinates":[13.40338,52.49973]},"properties":{"name":"Kreuzberg","distance_m":231.4952593}}]}` + "\n")

// serveLean serves /within as a separate process with only the work the
// request needs: one limiter decision (the same script, pipelined as the
// API's) and the geofence handler on a bare Gin engine, without the
// middleware chain or authentication. Its CPU per request, next to the
// API's, tells what the rest of the request path costs.
func serveLean(addr, dbURL, redisURL string) error {
	ctx := context.Background()
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 8, MinConns: 8, AppName: "geogate-bench-lean", Schema: pg.DefaultSchema, GenericPlans: true})
	if err != nil {
		return err
	}
	cat, err := catalog.Open(ctx, pool, catalog.Settings{Schemas: []string{"public"}, Own: pg.DefaultSchema}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	o, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(o)
	lim, err := ratelimit.New(rdb, map[string]ratelimit.Policy{
		"geofence": ratelimit.NewPolicy("geofence", ratelimit.Window{Limit: 100000, Period: time.Second}),
	}, ratelimit.Options{Pipeline: 16})
	if err != nil {
		return err
	}
	svc := geofence.New(pg.Runner{Pool: pool}, cat, benchSettings(), nil)
	h := geofence.NewHandler(svc, benchSettings(), geofence.Access{})
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/within", func(c *gin.Context) {
		d, err := lim.Check(c.Request.Context(), ratelimit.Request{Policy: "geofence", Identity: "ip:" + c.Request.RemoteAddr, Cost: 1})
		if err != nil || !d.Allowed {
			c.AbortWithStatus(http.StatusTooManyRequests)
			return
		}
		h.Within(c)
	})
	// The same handler without the limiter: what the decision costs.
	r.GET("/nolimit/within", h.Within)
	// The same requests through the gate, as api serve spends them: the
	// route's policy and the database budget admitted together, the
	// statement's time metered and settled.
	gated, err := gatedWithin(rdb, svc)
	if err != nil {
		return err
	}
	r.GET("/gate/within", gated)
	r.GET("/healthz", func(c *gin.Context) { c.Status(http.StatusOK) })
	// The loopback HTTP floor: plain net/http answering a fixed body, in
	// this separate process, so that its CPU is a server's alone.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /floor", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = []string{"application/geo+json"}
		_, _ = w.Write(floorBody)
	})
	// The same query with no code of geogate's around it: plain net/http,
	// the statement through the pool, the rows copied into the body. What
	// it costs is what serving an HTTP request and waiting on PostgreSQL
	// in one process costs at all.
	mux.HandleFunc("GET /raw/within", rawWithin(pool, svc))
	// The seed's design at its floor: one limiter decision (the seed's
	// script, in the seed's key layout) before the same raw statement.
	// Nothing that limits each request in Redis and queries PostgreSQL
	// serves faster in Go on this machine: bench/seed.sh sets it beside
	// the seed and geogate.
	raw := rawWithin(pool, svc)
	mux.HandleFunc("GET /limited/raw/within", func(w http.ResponseWriter, req *http.Request) {
		d, err := lim.Check(req.Context(), ratelimit.Request{Policy: "geofence", Identity: "ip:" + req.RemoteAddr, Cost: 1})
		if err != nil || !d.Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		raw(w, req)
	})
	mux.Handle("/", r)
	// LEAN_PPROF=addr serves its Go profiles, to see where its time goes.
	if a := os.Getenv("LEAN_PPROF"); a != "" {
		go func() { _ = http.ListenAndServe(a, http.DefaultServeMux) }()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return http.Serve(ln, mux)
}

// gatedWithin is the geofence handler behind a real gate over its own
// limiter: the policies /within spends in api serve (geofence, and the
// database budget in milliseconds), with limits no run reaches.
func gatedWithin(rdb redis.UniversalClient, svc *geofence.Service) (gin.HandlerFunc, error) {
	lim, err := ratelimit.New(rdb, map[string]ratelimit.Policy{
		"geofence": ratelimit.NewPolicy("geofence", ratelimit.Window{Limit: 100000, Period: time.Second}),
		"database": ratelimit.NewPolicy("database", ratelimit.Window{Limit: 100_000_000, Period: time.Second, Unit: ratelimit.DBTime}),
	}, ratelimit.Options{Pipeline: 16})
	if err != nil {
		return nil, err
	}
	g := gate.New(access.Settings{}, lim, nil)
	g.DBTime = func(ctx context.Context) time.Duration { return pg.MeterOf(ctx).DB() }
	h := geofence.NewHandler(svc, benchSettings(), geofence.Access{Gate: g})
	spend := gate.Spend{Policy: "geofence", Database: "database", Layers: true}
	return func(c *gin.Context) {
		ctx, _ := gate.WithRoute(c.Request.Context(), "GET /within", spend)
		ctx, _ = pg.WithMeter(ctx)
		c.Request = c.Request.WithContext(gate.As(ctx, "ip:"+c.Request.RemoteAddr, ""))
		h.Within(c)
	}, nil
}

func rawWithin(pool *pgxpool.Pool, svc *geofence.Service) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		var p [3]float64
		for i, k := range []string{"lng", "lat", "radius"} {
			v, err := strconv.ParseFloat(q.Get(k), 64)
			if err != nil {
				http.Error(w, "bad "+k, http.StatusUnprocessableEntity)
				return
			}
			p[i] = v
		}
		sql, args, _ := svc.WithinSQL(geofence.WithinQuery{Layer: "places", Lng: p[0], Lat: p[1], Radius: p[2], Limit: 100})
		rows, err := pool.Query(req.Context(), sql, args...)
		if err != nil {
			http.Error(w, "query failed", http.StatusServiceUnavailable)
			return
		}
		defer rows.Close()
		b := append(make([]byte, 0, 1024), `{"type":"FeatureCollection","features":[`...)
		for n := 0; rows.Next(); n++ {
			var id string
			var name *string
			var d float64
			var props, geom []byte
			if err := rows.Scan(&id, &name, &d, &props, &geom); err != nil {
				http.Error(w, "scan failed", http.StatusServiceUnavailable)
				return
			}
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"Feature","id":`...)
			b = append(b, id...)
			b = append(b, `,"geometry":`...)
			b = append(b, geom...)
			b = append(b, `,"properties":`...)
			b = append(b, props...)
			b = append(b, `,"distance_m":`...)
			b = strconv.AppendFloat(b, d, 'f', -1, 64)
			b = append(b, '}')
		}
		if rows.Err() != nil {
			http.Error(w, "query failed", http.StatusServiceUnavailable)
			return
		}
		b = append(b, "]}\n"...)
		w.Header()["Content-Type"] = []string{"application/geo+json"}
		_, _ = w.Write(b)
	}
}

// startLean runs this binary as the lean server on a free loopback port,
// under the process name "lean", and waits until it answers.
func startLean(dbURL, redisURL string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	// A copy named "lean" so that its CPU is told from this process's.
	dir, err := os.MkdirTemp("", "geogate-bench-")
	if err != nil {
		return "", nil, err
	}
	bin := dir + "/lean"
	if b, err := os.ReadFile(self); err != nil {
		return "", nil, err
	} else if err := os.WriteFile(bin, b, 0o755); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "-serve-lean", addr, "-db", dbURL, "-redis", redisURL)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = os.RemoveAll(dir) }
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base, stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("the lean server did not answer on %s", addr)
}
