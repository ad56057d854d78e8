package main

import (
	"fmt"
	"slices"
)

// summary is one side's medians over its trials, each figure on its own.
type summary struct {
	unloadedP50, unloadedP99       float64
	lightP50, lightP99, lightOK    float64
	lightP99Lo, lightP99Hi         float64
	heavyRate, heavyShed, heavyOth float64
	db, dbLo, dbHi, pgCores        float64
}

func summarizeSide(ts []trial) summary {
	f := func(get func(trial) float64) (med, lo, hi float64) {
		v := make([]float64, len(ts))
		for i, t := range ts {
			v[i] = get(t)
		}
		slices.Sort(v)
		return v[len(v)/2], v[0], v[len(v)-1]
	}
	med := func(get func(trial) float64) float64 { m, _, _ := f(get); return m }
	var s summary
	s.unloadedP50 = med(func(t trial) float64 { return t.unloaded.p50 })
	s.unloadedP99 = med(func(t trial) float64 { return t.unloaded.p99 })
	s.lightP50 = med(func(t trial) float64 { return t.light.p50 })
	s.lightP99, s.lightP99Lo, s.lightP99Hi = f(func(t trial) float64 { return t.light.p99 })
	s.lightOK = med(func(t trial) float64 { return t.light.okShare() })
	s.heavyRate = med(trial.heavyRate)
	s.heavyShed = med(func(t trial) float64 { return float64(t.heavy.shed) })
	s.heavyOth = med(func(t trial) float64 { return float64(t.heavy.other) })
	s.db, s.dbLo, s.dbHi = f(trial.dbRate)
	s.pgCores = med(trial.pgCores)
	return s
}

// report prints the medians, the goals and the RESULT lines.
func report(c config, trials map[string][]trial) {
	on, off := summarizeSide(trials["on"]), summarizeSide(trials["off"])
	fmt.Printf("Medians of %d trials per side (each figure on its own); shed and other are counts per trial of %s.\n\n", c.runs, c.dur)
	fmt.Println("| fair share | light alone p50, p99 ms | light under load p50 ms | p99 ms (min-max) | 2xx | heavy 2xx req/s | heavy shed (503) | heavy other | db commits/s (min-max) | pg CPU, cores |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range []struct {
		name string
		s    summary
	}{{"on", on}, {"off", off}} {
		s := r.s
		fmt.Printf("| %s | %.2f, %.2f | %.2f | %.2f (%.2f-%.2f) | %.2f%% | %.0f | %.0f | %.0f | %.0f (%.0f-%.0f) | %.2f |\n",
			r.name, s.unloadedP50, s.unloadedP99, s.lightP50, s.lightP99, s.lightP99Lo, s.lightP99Hi, s.lightOK,
			s.heavyRate, s.heavyShed, s.heavyOth, s.db, s.dbLo, s.dbHi, s.pgCores)
	}
	fmt.Println()
	if c.heavyConc == 0 {
		fmt.Printf("No goals: with no heavy callers, this is what the machine alone does to the light callers' tail: p99 %.1fx alone with fair share on, %.1fx off.\n\n",
			on.lightP99/on.unloadedP99, off.lightP99/off.unloadedP99)
		printResults(c, on, off)
		return
	}
	fmt.Println("Goals, fair share on:")
	fmt.Printf("- light p99 under load within 2x of the light load alone: %.2f ms vs %.2f ms, %.1fx: %s (fair share off: %.2f ms vs %.2f ms, %.1fx)\n",
		on.lightP99, on.unloadedP99, on.lightP99/on.unloadedP99, yes(on.lightP99 <= 2*on.unloadedP99), off.lightP99, off.unloadedP99, off.lightP99/off.unloadedP99)
	fmt.Printf("- light success at least 99%%: %.2f%%: %s (fair share off: %.2f%%)\n", on.lightOK, yes(on.lightOK >= 99), off.lightOK)
	fmt.Printf("- database work at least 90%% of that without fair share: %.0f vs %.0f commits/s, %.0f%%: %s\n",
		on.db, off.db, 100*on.db/off.db, yes(on.db >= 0.9*off.db))
	fmt.Println()
	printResults(c, on, off)
}

// printResults prints the load average and the RESULT lines.
func printResults(c config, on, off summary) {
	fmt.Printf("load average at the end: %s\n", loadAvg())
	for _, r := range []struct {
		name string
		s    summary
	}{{"on", on}, {"off", off}} {
		s := r.s
		fmt.Printf("RESULT %s side=%s unloaded_p50=%.2f unloaded_p99=%.2f light_p50=%.2f light_p99=%.2f light_p99_range=%.2f-%.2f light_ok=%.2f heavy_rps=%.0f heavy_shed=%.0f heavy_other=%.0f db_qps=%.0f db_qps_range=%.0f-%.0f pg_cores=%.2f heavy_keys=%d heavy_conc=%d light_keys=%d light_rate=%.0f spin=%d\n",
			c.name, r.name, s.unloadedP50, s.unloadedP99, s.lightP50, s.lightP99, s.lightP99Lo, s.lightP99Hi, s.lightOK,
			s.heavyRate, s.heavyShed, s.heavyOth, s.db, s.dbLo, s.dbHi, s.pgCores, c.heavyKeys, c.heavyConc, c.lightKeys, c.lightRate, c.spin)
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
