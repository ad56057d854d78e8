package rdb

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// poolCollector exports go-redis pool statistics, read at scrape time.
type poolCollector struct {
	client                        redis.UniversalClient
	total, idle, hits, misses, to *prometheus.Desc
}

// NewCollector returns a Prometheus collector for c's connection pool.
func NewCollector(c redis.UniversalClient) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("geogate_redis_pool_"+name, help, nil, nil)
	}
	return &poolCollector{
		client: c,
		total:  d("conns", "Connections open in the pool."),
		idle:   d("idle_conns", "Idle connections in the pool."),
		hits:   d("hits_total", "Times a free connection was found in the pool."),
		misses: d("misses_total", "Times no free connection was found in the pool."),
		to:     d("timeouts_total", "Times a wait for a connection timed out."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.client.PoolStats()
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns))
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(c.to, prometheus.CounterValue, float64(s.Timeouts))
}
