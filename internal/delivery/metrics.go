package delivery

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the delivery's Prometheus series.
type Metrics struct {
	delivered prometheus.Counter
	retried   prometheus.Counter
	dead      prometheus.Counter
	postponed prometheus.Counter
	latency   prometheus.Histogram
	outboxAge prometheus.Gauge
	inFlight  prometheus.Gauge
}

// NewMetrics registers the delivery metrics with reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_events_delivered_total",
			Help: "Events a webhook accepted (answered 2xx).",
		}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_events_delivery_retries_total",
			Help: "Failed webhook deliveries that will be tried again.",
		}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_events_dead_lettered_total",
			Help: "Events whose retries ran out (EVENTS_RETRY_FOR): now dead letters.",
		}),
		postponed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_events_delivery_postponed_total",
			Help: "Deliveries put off because their subscriber's deliveries policy was spent; not attempts.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "geogate_events_delivery_latency_seconds",
			Help:    "Time from an event entering the outbox to its webhook accepting it, retries included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60, 600, 3600, 21600, 86400},
		}),
		outboxAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "geogate_events_outbox_age_seconds",
			Help: "Age of the oldest event still pending delivery to a webhook, as this replica last looked; 0 when none.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "geogate_events_deliveries_in_flight",
			Help: "Webhook deliveries this replica is making now.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.delivered, m.retried, m.dead, m.postponed, m.latency, m.outboxAge, m.inFlight)
	}
	return m
}
