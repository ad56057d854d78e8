package pg

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolCollector exports pgxpool statistics as gauges and counters, read at
// scrape time so they cost nothing between scrapes.
type poolCollector struct {
	pool                          *pgxpool.Pool
	total, idle, acquired, max    *prometheus.Desc
	acquires, waits, waitDuration *prometheus.Desc
	canceled                      *prometheus.Desc
}

// NewCollector returns a Prometheus collector for pool, whose metrics are
// called geogate_pgx_pool_*.
func NewCollector(pool *pgxpool.Pool) prometheus.Collector { return NewNamedCollector(pool, "") }

// NewNamedCollector is NewCollector for a second pool: its metrics are
// called geogate_pgx_<name>_pool_*.
func NewNamedCollector(pool *pgxpool.Pool, name string) prometheus.Collector {
	prefix := "geogate_pgx_pool_"
	if name != "" {
		prefix = "geogate_pgx_" + name + "_pool_"
	}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, help, nil, nil)
	}
	return &poolCollector{
		pool:         pool,
		total:        d("conns", "Connections open in the pool."),
		idle:         d("idle_conns", "Idle connections in the pool."),
		acquired:     d("acquired_conns", "Connections in use."),
		max:          d("max_conns", "Largest size the pool may grow to."),
		acquires:     d("acquires_total", "Connections acquired from the pool."),
		waits:        d("empty_acquires_total", "Acquires that had to wait for a connection."),
		waitDuration: d("acquire_wait_seconds_total", "Time spent waiting for connections."),
		canceled:     d("canceled_acquires_total", "Acquires cancelled by their context."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	g := prometheus.GaugeValue
	ch <- prometheus.MustNewConstMetric(c.total, g, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, g, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.acquired, g, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.max, g, float64(s.MaxConns()))
	cnt := prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(c.acquires, cnt, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waits, cnt, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waitDuration, cnt, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(c.canceled, cnt, float64(s.CanceledAcquireCount()))
}
