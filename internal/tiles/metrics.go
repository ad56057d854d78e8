package tiles

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count tile answers and time renders; a nil *metrics does
// nothing.
type metrics struct {
	answers *prometheus.CounterVec
	renders *prometheus.HistogramVec
	stale   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_tiles_requests_total",
			Help: "Tile requests by layer and result (hit, miss, outside, error).",
		}, []string{"layer", "result"}),
		renders: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "geogate_tiles_render_duration_seconds",
			Help:    "Duration of tile queries by layer and zoom band (low 0-7, mid 8-11, high 12+).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"layer", "zooms"}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_tiles_replica_stale_renders_total",
			Help: "Tiles drawn on a replica that had not replayed the layer's current version, and drawn again on the primary.",
		}),
	}
	reg.MustRegister(m.answers, m.renders, m.stale)
	return m
}

func (m *metrics) staleRender() {
	if m != nil {
		m.stale.Inc()
	}
}

func (m *metrics) answer(layer, result string) {
	if m != nil {
		m.answers.WithLabelValues(layer, result).Inc()
	}
}

func (m *metrics) rendered(layer string, z int, d time.Duration) {
	if m == nil {
		return
	}
	band := "low"
	switch {
	case z >= 12:
		band = "high"
	case z >= 8:
		band = "mid"
	}
	m.renders.WithLabelValues(layer, band).Observe(d.Seconds())
}
