package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startPprof serves net/http/pprof on addr, on a server of its own so that
// the profiles never reach the public router. It returns once the address
// is bound (a bind failure is a start-up error), printing its URL on
// stdout (a port of 0 is picked by the system), and gives back a func that
// closes the server and waits for it; a profile being taken is cut short.
func startPprof(addr string, log *slog.Logger, stdout io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("PPROF_ADDR=%q: listen: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, allocs, goroutine, block, mutex, threadcreate
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No WriteTimeout: a CPU profile or trace answers after ?seconds=N.
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if isLoopback(ln.Addr()) {
		log.Info("pprof listening", "addr", ln.Addr().String())
	} else {
		log.Warn("pprof listening on a non-loopback address: anyone who reaches it can read the process's memory profile and command line and slow it down; keep PPROF_ADDR private",
			"addr", ln.Addr().String())
	}
	fmt.Fprintf(stdout, "%shttp://%s/debug/pprof/\n", pprofPrefix, ln.Addr())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}

// pprofPrefix starts the line naming the pprof listener's URL on stdout.
const pprofPrefix = "pprof listening on "

// isLoopback reports whether a listener's address is reachable only from
// this machine.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
