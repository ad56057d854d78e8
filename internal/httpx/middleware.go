package httpx

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
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
		c.Header(RequestIDHeader, id)
		c.Set(loggerKey, base.With("request_id", id))
		c.Next()
	}
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

// AccessLog writes one line per request: route, status, duration.
func AccessLog() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		l := Logger(c)
		if !l.Enabled(c.Request.Context(), slog.LevelInfo) {
			return // LOG_LEVEL above info: do not even build the line
		}
		l.Info("request",
			"method", c.Request.Method,
			"route", routeOf(c),
			"path", c.Request.URL.Path,
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
		labels := prometheus.Labels{
			"route":  routeOf(c),
			"method": c.Request.Method,
			"status": strconv.Itoa(c.Writer.Status()),
		}
		m.requests.With(labels).Inc()
		m.latency.With(labels).Observe(time.Since(start).Seconds())
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
