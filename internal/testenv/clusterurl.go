package testenv

import (
	"strings"
	"testing"
)

// RedisClusterURL is the REDIS_URL of the shared test Redis Cluster
// (started by RedisCluster on first use): redis-cluster:// and its nodes.
func RedisClusterURL(tb testing.TB) string {
	tb.Helper()
	RedisCluster(tb)
	return "redis-cluster://" + strings.Join(cluster.addrs, ",")
}
