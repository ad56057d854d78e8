package fairshare

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count what the Queue decides; they work unregistered.
type metrics struct {
	atOnce, afterWait prometheus.Counter
	shedBy            *prometheus.CounterVec
	wait              prometheus.Histogram
	collectors        []prometheus.Collector
}

func newMetrics() *metrics {
	admitted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "geogate_fairshare_admitted_total",
		Help: "Database calls given a slot: at once (a slot was free) or after waiting in the queue.",
	}, []string{"how"})
	m := &metrics{
		atOnce:    admitted.WithLabelValues("at_once"),
		afterWait: admitted.WithLabelValues("after_wait"),
		shedBy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_fairshare_shed_total",
			Help: "Database calls turned away with 503, by reason: full (the queue held DB_FAIR_MAX_QUEUE), overload (more waited than could be served within DB_FAIR_MAX_WAIT; the heaviest caller's are turned away) or timeout (waited DB_FAIR_MAX_WAIT).",
		}, []string{"reason"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "geogate_fairshare_wait_seconds",
			Help:    "How long database calls that found no free slot waited, whether they then got one or not.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	for _, r := range []string{ReasonFull, ReasonOverload, ReasonTimeout} {
		m.shedBy.WithLabelValues(r)
	}
	m.collectors = []prometheus.Collector{admitted, m.shedBy, m.wait}
	return m
}

func (m *metrics) admitted(waited bool) {
	if waited {
		m.afterWait.Inc()
	} else {
		m.atOnce.Inc()
	}
}

func (m *metrics) shed(reason string)     { m.shedBy.WithLabelValues(reason).Inc() }
func (m *metrics) waited(d time.Duration) { m.wait.Observe(d.Seconds()) }

// Register adds the Queue's metrics to reg: those above, and gauges of the
// calls waiting and the slots held, read when scraped.
func (q *Queue) Register(reg prometheus.Registerer) {
	reg.MustRegister(append(q.m.collectors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "geogate_fairshare_waiting",
			Help: "Database calls waiting for a slot: the queue's depth.",
		}, func() float64 { return float64(q.Waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "geogate_fairshare_slots_in_use",
			Help: "Slots held by database calls, of DB_FAIR_SLOTS.",
		}, func() float64 { return float64(q.InUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "geogate_fairshare_limit",
			Help: "How many database calls the queue admits at once now: DB_FAIR_SLOTS, or fewer (down to DB_FAIR_MIN_SLOTS) while the database runs the same work slower than unloaded.",
		}, func() float64 { return float64(q.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "geogate_fairshare_slowdown",
			Help: "The latest measure of how many times slower than unloaded the database runs the same work (a geometric mean over the kinds of work seen in the last step); past DB_FAIR_LATENCY_TOLERANCE the limit narrows.",
		}, func() float64 { return q.Slowdown() }),
	)...)
}
