package httpx

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	loggerKey = "geogate.logger"
	// RequestIDHeader carries the request id in and out.
	RequestIDHeader = "X-Request-ID"
)

// RequestID takes a sane incoming X-Request-ID or makes one, echoes it back
// and puts a logger carrying it into the context.
func RequestID(base *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		c.Writer.Header()[canonicalRequestID] = []string{id}
		// The logger carrying the id is built on the first line logged:
		// most requests log none (LOG_LEVEL above info), and slog's With
		// formats the attribute at once.
		c.Set(loggerKey, &requestLogger{base: base, id: id})
		c.Next()
	}
}

// canonicalRequestID is RequestIDHeader as net/http keys it.
var canonicalRequestID = http.CanonicalHeaderKey(RequestIDHeader)

// requestLogger is a request's logger, made when first asked for.
type requestLogger struct {
	base  *slog.Logger
	id    string
	attrs []any                       // added by AddLogAttrs, after the id
	l     atomic.Pointer[slog.Logger] // a handler's goroutines may log too
}

func (r *requestLogger) logger() *slog.Logger {
	if l := r.l.Load(); l != nil {
		return l
	}
	l := r.base
	if r.id != "" {
		l = l.With("request_id", r.id)
	}
	if len(r.attrs) > 0 {
		l = l.With(r.attrs...)
	}
	r.l.CompareAndSwap(nil, l)
	return r.l.Load()
}

// with is r with more attributes, still made when first asked for.
func (r *requestLogger) with(args []any) *requestLogger {
	return &requestLogger{base: r.base, id: r.id, attrs: append(slices.Clip(r.attrs), args...)}
}

// enabled reports whether the request's logger writes at level, without
// making it.
func (r *requestLogger) enabled(c *gin.Context, level slog.Level) bool {
	return r.base.Enabled(c.Request.Context(), level)
}

// validRequestID accepts short printable ASCII ids, so a client cannot put
// control characters or megabytes into our logs.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AccessLog writes one line per request: route, path and query (with
// credentials redacted), status, duration.
func AccessLog() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		if !LogEnabled(c, slog.LevelInfo) {
			return // LOG_LEVEL above info: do not even build the line
		}
		Logger(c).Info("request",
			"method", c.Request.Method,
			"route", routeOf(c),
			"path", c.Request.URL.Path,
			// The path never holds userinfo (net/http keeps it out of
			// URL.Path); the query may hold a key, which is redacted.
			"query", RedactedQuery(c.Request.URL.RawQuery),
			"status", c.Writer.Status(),
			"dur_ms", float64(time.Since(start).Microseconds())/1000,
			"bytes", c.Writer.Size(),
			"client", ClientOf(c.Request).Addr.String(),
		)
	}
}

// Recover turns a panic into a 500 with a generic body and logs the stack.
func Recover() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				Logger(c).Error("panic", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				if !c.Writer.Written() {
					c.AbortWithStatusJSON(http.StatusInternalServerError, Detail{Detail: "Internal server error."})
				} else {
					c.Abort()
				}
			}
		}()
		c.Next()
	}
}

// Metrics counts requests and their latency by route, method and status.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// series holds the counter and histogram of each label set met so far:
	// finding them in the vectors hashes the labels on every request.
	series sync.Map // seriesKey -> *series
}

type seriesKey struct {
	route, method string
	status        int
}

type series struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// of returns the series of k, made on first use. Routes and methods come
// from the router's fixed set (unmatched paths are "unmatched", methods
// outside it are refused before), so the map stays small.
func (m *Metrics) of(k seriesKey) *series {
	if s, ok := m.series.Load(k); ok {
		return s.(*series)
	}
	labels := prometheus.Labels{"route": k.route, "method": k.method, "status": strconv.Itoa(k.status)}
	s, _ := m.series.LoadOrStore(k, &series{requests: m.requests.With(labels), latency: m.latency.With(labels)})
	return s.(*series)
}

// NewMetrics registers the HTTP metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_http_requests_total",
			Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "geogate_http_request_duration_seconds",
			Help:    "HTTP request latency by route, method and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method", "status"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// Middleware records each request.
func (m *Metrics) Middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		s := m.of(seriesKey{route: routeOf(c), method: c.Request.Method, status: c.Writer.Status()})
		s.requests.Inc()
		s.latency.Observe(time.Since(start).Seconds())
	}
}

// routeOf is the route pattern, never the raw path, so that metrics keep a
// bounded set of labels whatever clients send.
func routeOf(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return "unmatched"
}
