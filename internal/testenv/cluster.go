package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProcess is a redis-server this test binary started and owns: for
// tests that stop and restart Redis, which the shared test Redis must never
// go through.
type RedisProcess struct {
	Port int
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *osexec.Cmd
}

// Addr is host:port of the process.
func (p *RedisProcess) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

// StartRedis starts a private, non-persistent redis-server on a free
// loopback port, stopped when the test ends. It fails the test when
// redis-server is missing or does not answer.
func StartRedis(tb testing.TB, extra ...string) *RedisProcess {
	tb.Helper()
	NeedServices(tb, "redis-server (a private Redis process)")
	p := &RedisProcess{Port: freePort(tb, false), dir: tb.TempDir(), args: extra}
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Stop)
	return p
}

// Start (re)starts the process on its port and waits until it answers.
func (p *RedisProcess) Start() error {
	bin, err := osexec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not installed (apt-get install redis-server): %v", err)
	}
	args := append([]string{
		"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1", "--dir", p.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
	}, p.args...)
	cmd := osexec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	go func() { _ = cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("redis-server on port %d did not answer: %v", p.Port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the process (as a crash would) and waits until its port is
// closed.
func (p *RedisProcess) Stop() {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	for range 200 {
		conn, err := net.DialTimeout("tcp", p.Addr(), 50*time.Millisecond)
		if err != nil {
			return
		}
		_ = conn.Close()
		time.Sleep(10 * time.Millisecond)
	}
}

// Pause freezes the process (SIGSTOP): it keeps its connections open but
// answers nothing, like a hung server. Resume undoes it.
func (p *RedisProcess) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume lets a paused process run again.
func (p *RedisProcess) Resume() error { return p.signal(syscall.SIGCONT) }

func (p *RedisProcess) signal(s os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("redis-server on port %d is not running", p.Port)
	}
	return p.cmd.Process.Signal(s)
}

// freePort returns a loopback port that is free now; with bus, port+10000
// (a Cluster node's bus port) is free too.
func freePort(tb testing.TB, bus bool) int {
	tb.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !bus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		if ln2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			_ = ln2.Close()
			return port
		}
	}
	tb.Fatal("no free port")
	return 0
}

var cluster struct {
	once  sync.Once
	err   error
	nodes []*RedisProcess
	addrs []string
	dir   string
}

// RedisCluster returns a client for a three-master Redis Cluster of
// redis-server processes on loopback, started on first use and shared by
// the whole test binary; call StopRedisCluster from TestMain to end it.
// The test fails when the cluster cannot start.
func RedisCluster(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	NeedServices(tb, "redis-server and redis-cli (a private Redis Cluster)")
	cluster.once.Do(func() { cluster.err = startCluster(tb) })
	if cluster.err != nil {
		tb.Fatalf("redis cluster: %v", cluster.err)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cluster.addrs, ReadTimeout: time.Second, WriteTimeout: time.Second, ContextTimeoutEnabled: true,
	})
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return s.Ping(ctx).Err() }); err != nil {
		tb.Fatalf("redis cluster: %v", err)
	}
	return c
}

// StopRedisCluster kills the cluster's processes, if RedisCluster started
// them, and removes their files.
func StopRedisCluster() {
	for _, n := range cluster.nodes {
		n.Stop()
	}
	if cluster.dir != "" {
		_ = os.RemoveAll(cluster.dir)
	}
}

func startCluster(tb testing.TB) error {
	if _, err := osexec.LookPath("redis-cli"); err != nil {
		return fmt.Errorf("redis-cli is not installed: %v", err)
	}
	dir, err := os.MkdirTemp("", "geogate-cluster-")
	if err != nil {
		return err
	}
	cluster.dir = dir
	for i := range 3 {
		nd := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(nd, 0o755); err != nil {
			return err
		}
		p := &RedisProcess{Port: freePort(tb, true), dir: nd, args: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
		}}
		if err := p.Start(); err != nil {
			return err
		}
		cluster.nodes = append(cluster.nodes, p)
		cluster.addrs = append(cluster.addrs, p.Addr())
	}
	args := append([]string{"--cluster", "create"}, cluster.addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := osexec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range cluster.addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				return fmt.Errorf("node %s never reached cluster_state:ok: %v %s", addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = c.Close()
	}
	return nil
}
