package testenv

import (
	"context"
	"errors"
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
// go through. It listens on a Unix socket of its own, so that it never
// meets another server over a port (a Cluster node, which must listen on
// TCP, has a Port instead).
type RedisProcess struct {
	// Port is the TCP port of a Cluster node; 0 for a socket-only server.
	Port int
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *osexec.Cmd
}

// Socket is the path of the process's Unix socket.
func (p *RedisProcess) Socket() string { return filepath.Join(p.dir, "redis.sock") }

// URL is the REDIS_URL of the process.
func (p *RedisProcess) URL() string { return "unix://" + p.Socket() }

// Options are client options that reach the process.
func (p *RedisProcess) Options() *redis.Options {
	if p.Port != 0 {
		return &redis.Options{Addr: p.Addr()}
	}
	return &redis.Options{Network: "unix", Addr: p.Socket()}
}

// Addr is host:port of a Cluster node.
func (p *RedisProcess) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

// StartRedis starts a private, non-persistent redis-server on a Unix
// socket of its own, stopped when the test ends. It fails the test when
// redis-server is missing or does not answer.
func StartRedis(tb testing.TB, extra ...string) *RedisProcess {
	tb.Helper()
	NeedServices(tb, "redis-server (a private Redis process)")
	// A short folder of its own: a socket path is limited to 107 bytes, and
	// test names make long temporary folders.
	dir, err := os.MkdirTemp("", "ggr-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &RedisProcess{dir: dir, args: extra}
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Stop)
	return p
}

// Start (re)starts the process on its socket or port and waits until it
// answers.
func (p *RedisProcess) Start() error {
	bin, err := osexec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not installed (apt-get install redis-server): %v", err)
	}
	listen := []string{"--port", "0", "--unixsocket", p.Socket(), "--unixsocketperm", "700"}
	if p.Port != 0 {
		listen = []string{"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1"}
	}
	args := append(append(listen, "--dir", p.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
	), p.args...)
	cmd := osexec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	o := p.Options()
	o.MaxRetries = -1
	c := redis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server %s exited at start: %w", p.where(), errExited)
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("redis-server %s did not answer: %v", p.where(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errExited is a server that ended at start, as when its port was taken.
var errExited = errors.New("the process ended")

func (p *RedisProcess) where() string {
	if p.Port != 0 {
		return "on port " + strconv.Itoa(p.Port)
	}
	return "on " + p.Socket()
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
	network, addr := "unix", p.Socket()
	if p.Port != 0 {
		network, addr = "tcp", p.Addr()
	}
	for range 200 {
		conn, err := net.DialTimeout(network, addr, 50*time.Millisecond)
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
		return fmt.Errorf("redis-server %s is not running", p.where())
	}
	return p.cmd.Process.Signal(s)
}

// clusterPort returns a loopback port that, with port+10000 (a Cluster
// node's bus port), was free a moment ago. redis-server cannot listen on a
// port the system picks, so another process may take it before the node
// does: startNode then tries another.
func clusterPort() (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if port+10000 > 65535 {
			continue
		}
		if ln2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			_ = ln2.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free pair of ports for a Cluster node")
}

// startNode starts a Cluster node in dir, on another port when the one it
// picked was taken in the meantime.
func startNode(dir string) (*RedisProcess, error) {
	var err error
	for range 5 {
		p := &RedisProcess{dir: dir, args: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
		}}
		if p.Port, err = clusterPort(); err != nil {
			return nil, err
		}
		if err = p.Start(); !errors.Is(err, errExited) {
			return p, err
		}
		_ = os.Remove(filepath.Join(dir, "nodes.conf"))
	}
	return nil, err
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
		p, err := startNode(nd)
		if err != nil {
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
