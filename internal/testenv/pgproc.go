package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresProcess is a PostgreSQL server this test binary started and
// owns, for tests that stop and restart the database, which the shared
// test server must never go through. Its superuser is geogate (trust
// authentication). It listens on a Unix socket in a folder of its own and
// on no TCP port, so that it never meets another server over a port.
type PostgresProcess struct {
	dir  string // holds data/ and the socket
	bin  string
	cred *syscall.Credential // the postgres user when running as root
	mu   sync.Mutex
	cmd  *osexec.Cmd
	done chan struct{}
}

// URL is the connection URL of the process's "postgres" database.
func (p *PostgresProcess) URL() string {
	return "postgres://geogate@/postgres?host=" + url.QueryEscape(p.dir) + "&sslmode=disable"
}

// StartPostgres creates a throw-away cluster (initdb, no fsync) and starts
// it; it is stopped and removed when the test ends. As root, the cluster belongs to the postgres user, as PostgreSQL
// refuses to run as root.
func StartPostgres(tb testing.TB) *PostgresProcess {
	tb.Helper()
	NeedServices(tb, "the PostgreSQL server binaries (a private PostgreSQL process)")
	bin, err := postgresBin()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "geogate-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &PostgresProcess{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("running as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := p.command("initdb", "-D", data, "-U", "geogate", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("listen_addresses = ''\nunix_socket_directories = '%s'\n"+
		"max_connections = 50\nshared_buffers = 32MB\njit = off\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n",
		dir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Stop)
	return p
}

// postgresBin finds the newest PostgreSQL server binaries.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if path, err := osexec.LookPath("postgres"); err == nil {
		return filepath.Dir(path), nil
	}
	return "", fmt.Errorf("PostgreSQL server binaries not found (apt-get install postgresql postgis)")
}

func (p *PostgresProcess) command(name string, args ...string) *osexec.Cmd {
	cmd := osexec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	dieWithParent(cmd)
	if p.cred != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = p.cred
	}
	return cmd
}

// Start (re)starts the server and waits until it accepts connections.
func (p *PostgresProcess) Start() error {
	logf, err := os.OpenFile(filepath.Join(p.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := p.command("postgres", "-D", filepath.Join(p.dir, "data"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, p.URL())
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
			return fmt.Errorf("postgres in %s exited: %s", p.dir, log)
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("postgres in %s did not accept connections: %v", p.dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down as `pg_ctl stop -m fast` does (SIGINT: open
// sessions are ended) and waits for it to exit.
func (p *PostgresProcess) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// StartReplica makes a streaming replica of p (a base backup with
// pg_basebackup -R, then streaming over p's socket) in a folder of its
// own, and starts it; it is stopped and removed when the test ends.
func (p *PostgresProcess) StartReplica(tb testing.TB) *PostgresProcess {
	tb.Helper()
	dir, err := os.MkdirTemp("", "geogate-pg-replica-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	r := &PostgresProcess{dir: dir, bin: p.bin, cred: p.cred}
	if p.cred != nil {
		if err := os.Chmod(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	backup := r.command("pg_basebackup", "-D", data, "-R", "-X", "stream", "-c", "fast",
		"-d", "host="+p.dir+" user=geogate dbname=postgres")
	if out, err := backup.CombinedOutput(); err != nil {
		tb.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	// The copied configuration names the primary's socket folder.
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = fmt.Fprintf(f, "unix_socket_directories = '%s'\nhot_standby = on\n", dir)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Stop)
	return r
}

// Crash ends the server as a crash would (an immediate shutdown: SIGQUIT,
// no checkpoint; the next Start recovers) and waits for it to exit.
func (p *PostgresProcess) Crash() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	<-done
}
