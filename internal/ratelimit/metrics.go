package ratelimit

import "github.com/prometheus/client_golang/prometheus"

// metrics are the limiter's Prometheus series.
type metrics struct {
	decisions *prometheus.CounterVec   // policy, outcome, backend
	shadow    *prometheus.CounterVec   // policy
	redisDur  *prometheus.HistogramVec // op, result
	reloads   prometheus.Counter
	fallbacks *prometheus.CounterVec // policy, mode
	breaker   prometheus.Gauge
	trips     prometheus.Counter
	inflight  *prometheus.CounterVec // policy, outcome
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_ratelimit_decisions_total",
			Help: "Rate-limit decisions by policy, outcome (allowed, rejected, unavailable) and backend (redis, local, none).",
		}, []string{"policy", "outcome", "backend"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_ratelimit_shadow_rejections_total",
			Help: "Requests a shadow-mode policy would have rejected but admitted.",
		}, []string{"policy"}),
		redisDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "geogate_ratelimit_redis_duration_seconds",
			Help:    "Duration of rate-limit script calls to Redis, by operation and result.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5},
		}, []string{"op", "result"}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_ratelimit_script_reloads_total",
			Help: "Script calls that found the script missing on Redis (NOSCRIPT) and sent it again.",
		}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_ratelimit_fallback_decisions_total",
			Help: "Decisions made without Redis, by policy and failure mode (local, open, closed).",
		}, []string{"policy", "mode"}),
		breaker: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "geogate_ratelimit_breaker_open",
			Help: "1 while the circuit breaker keeps rate-limit calls away from Redis.",
		}),
		trips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_ratelimit_fallback_activations_total",
			Help: "Times the circuit breaker opened and policies switched to their failure mode.",
		}),
		inflight: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_ratelimit_concurrency_total",
			Help: "In-flight slot requests by policy and outcome (acquired, rejected).",
		}, []string{"policy", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.decisions, m.shadow, m.redisDur, m.reloads, m.fallbacks, m.breaker, m.trips, m.inflight)
	}
	return m
}
