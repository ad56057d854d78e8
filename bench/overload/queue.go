package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// queueWatch samples the fair queue's limit and measured slowdown from a
// service's /metrics while a trial runs (none with fair share off).
type queueWatch struct {
	stop chan struct{}
	done chan queueFigures
}

// queueFigures are the means of the samples; n is 0 without a queue.
type queueFigures struct {
	limit, slowdown float64
	minLimit        float64
	n               int
}

func (f queueFigures) String() string {
	if f.n == 0 {
		return ""
	}
	return fmt.Sprintf(" | queue limit mean %.1f (least %.0f), slowdown mean %.2f", f.limit, f.minLimit, f.slowdown)
}

// watchQueue samples base's metrics every 100 ms, the queue's step.
func watchQueue(base string) *queueWatch {
	w := &queueWatch{stop: make(chan struct{}), done: make(chan queueFigures, 1)}
	go func() {
		var f queueFigures
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				if f.n > 0 {
					f.limit /= float64(f.n)
					f.slowdown /= float64(f.n)
				}
				w.done <- f
				return
			case <-tick.C:
				limit, slowdown, ok := queueGauges(base)
				if !ok {
					continue
				}
				if f.n == 0 || limit < f.minLimit {
					f.minLimit = limit
				}
				f.limit += limit
				f.slowdown += slowdown
				f.n++
			}
		}
	}()
	return w
}

func (w *queueWatch) figures() queueFigures {
	close(w.stop)
	return <-w.done
}

// queueGauges reads geogate_fairshare_limit and _slowdown; false when
// the service has no queue or could not be read.
func queueGauges(base string) (limit, slowdown float64, ok bool) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, cut := strings.Cut(sc.Text(), " ")
		if !cut {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "geogate_fairshare_limit":
			limit, found = x, found+1
		case "geogate_fairshare_slowdown":
			slowdown, found = x, found+1
		}
	}
	return limit, slowdown, found == 2
}
