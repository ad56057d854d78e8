// Package rdb opens geogate's Redis client from one URL that names a single
// node, a Sentinel group or a Cluster.
package rdb

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ParseURL turns a URL into options for a UniversalClient:
//
//	redis://[user:pass@]host:port[/db]             one node (rediss:// for TLS)
//	redis-cluster://[user:pass@]h1:p1,h2:p2        a Cluster, seeded by any nodes
//	redis-sentinel://[user:pass@]h1:p1,h2:p2/name[?db=N&sentinel_password=...]
//	                                              a Sentinel group and its master
//	unix://[user:pass@]/path/to/redis.sock[?db=N]  one node on a Unix socket
func ParseURL(raw string) (*redis.UniversalOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL is malformed: %v", redactErr(err))
	}
	if u.Scheme == "unix" {
		return parseUnixURL(u)
	}
	kind, secure := "", strings.HasPrefix(u.Scheme, "rediss")
	switch strings.TrimPrefix(strings.TrimPrefix(u.Scheme, "rediss"), "redis") {
	case "":
		kind = "single"
	case "-cluster":
		kind = "cluster"
	case "-sentinel":
		kind = "sentinel"
	default:
		return nil, fmt.Errorf("REDIS_URL scheme %q is not one of redis, rediss, redis-cluster, redis-sentinel", u.Scheme)
	}
	o := &redis.UniversalOptions{}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if u.Host == "" {
		return nil, fmt.Errorf("REDIS_URL names no host")
	}
	for _, h := range strings.Split(u.Host, ",") {
		if _, _, err := splitHostPort(h); err != nil {
			return nil, fmt.Errorf("REDIS_URL host %q: %v", h, err)
		}
		o.Addrs = append(o.Addrs, withDefaultPort(h))
	}
	path := strings.Trim(u.Path, "/")
	q := u.Query()
	switch kind {
	case "single":
		if len(o.Addrs) != 1 {
			return nil, fmt.Errorf("REDIS_URL: use redis-cluster:// or redis-sentinel:// for several hosts")
		}
		if path != "" {
			if o.DB, err = strconv.Atoi(path); err != nil || o.DB < 0 {
				return nil, fmt.Errorf("REDIS_URL database %q is not a number", path)
			}
		}
	case "cluster":
		o.IsClusterMode = true
	case "sentinel":
		if path == "" {
			return nil, fmt.Errorf("REDIS_URL: a sentinel URL needs the master name as its path")
		}
		o.MasterName = path
		o.SentinelUsername = q.Get("sentinel_username")
		o.SentinelPassword = q.Get("sentinel_password")
		if db := q.Get("db"); db != "" {
			if o.DB, err = strconv.Atoi(db); err != nil || o.DB < 0 {
				return nil, fmt.Errorf("REDIS_URL db %q is not a number", db)
			}
		}
	}
	if secure {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

// Open builds the client for raw and checks that Redis answers before ctx
// ends. timeout bounds each command that has no deadline of its own.
func Open(ctx context.Context, raw string, timeout time.Duration) (redis.UniversalClient, error) {
	o, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	o.DialTimeout = 2 * time.Second
	o.ReadTimeout = timeout
	o.WriteTimeout = timeout
	o.ContextTimeoutEnabled = true
	o.PoolSize = 64
	o.MaxRetries = 1
	c := redis.NewUniversalClient(o)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis at %s is unreachable: %v", strings.Join(o.Addrs, ","), err)
	}
	return c, nil
}

// parseUnixURL is ParseURL for a node on a Unix socket: the URL's path is
// the socket's.
func parseUnixURL(u *url.URL) (*redis.UniversalOptions, error) {
	if u.Host != "" || u.Path == "" {
		return nil, fmt.Errorf("REDIS_URL: a unix URL names its socket as an absolute path, unix:///run/redis.sock")
	}
	o := &redis.UniversalOptions{Addrs: []string{u.Path}}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if db := u.Query().Get("db"); db != "" {
		var err error
		if o.DB, err = strconv.Atoi(db); err != nil || o.DB < 0 {
			return nil, fmt.Errorf("REDIS_URL db %q is not a number", db)
		}
	}
	o.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", addr)
	}
	return o, nil
}

func splitHostPort(h string) (string, string, error) {
	if !strings.Contains(h, ":") {
		return h, "", nil
	}
	i := strings.LastIndex(h, ":")
	port := h[i+1:]
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return h[:i], port, nil
}

func withDefaultPort(h string) string {
	if strings.Contains(h, ":") {
		return h
	}
	return h + ":6379"
}

// redactErr keeps url.Error from quoting the whole URL, password included.
func redactErr(err error) string {
	if e, ok := err.(*url.Error); ok {
		return e.Err.Error()
	}
	return err.Error()
}
