package events

import "github.com/prometheus/client_golang/prometheus"

// metrics count positions and transitions as they are committed.
type metrics struct {
	positions   *prometheus.CounterVec
	transitions *prometheus.CounterVec
}

// NewMetrics registers the events metrics with reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *metrics { return newMetrics(reg) }

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		positions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_events_positions_total",
			Help: "Positions accepted, by outcome: evaluated, late (older than the device's last) or still (within its accuracy).",
		}, []string{"outcome"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_events_transitions_total",
			Help: "Events committed to the outbox, by kind.",
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.positions, m.transitions)
	}
	return m
}
