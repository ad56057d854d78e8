package limits

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	info          *prometheus.GaugeVec
	reloads       *prometheus.CounterVec
	lastReloadOK  prometheus.Gauge
	overrideReads *prometheus.CounterVec
	overrides     *prometheus.GaugeVec
	invalid       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "geogate_ratelimit_config_info",
			Help: "1 for the version of the rate-limit policy file this process runs (builtin without a file).",
		}, []string{"version"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_ratelimit_config_reloads_total",
			Help: "Re-reads of the rate-limit policy file (SIGHUP) by result: ok, or error (the running policies stayed).",
		}, []string{"result"}),
		lastReloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "geogate_ratelimit_config_last_reload_ok",
			Help: "0 when the last re-read of the rate-limit policy file failed, else 1.",
		}),
		overrideReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_ratelimit_overrides_reads_total",
			Help: "Reads of the tier and key overrides from PostgreSQL by result.",
		}, []string{"result"}),
		overrides: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "geogate_ratelimit_overrides",
			Help: "Policy overrides stored in PostgreSQL and in force, by kind (tier, key); those left out are in geogate_ratelimit_overrides_invalid.",
		}, []string{"kind"}),
		invalid: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "geogate_ratelimit_overrides_invalid",
			Help: "Stored overrides left out because their policy is unknown or cannot run with their windows.",
		}),
	}
	m.lastReloadOK.Set(1)
	if reg != nil {
		reg.MustRegister(m.info, m.reloads, m.lastReloadOK, m.overrideReads, m.overrides, m.invalid)
	}
	return m
}

// version makes v the one version the info metric shows.
func (m *metrics) version(v string) {
	m.info.Reset()
	m.info.WithLabelValues(v).Set(1)
}
