package load

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// CPU returns the CPU time used so far by every process on the machine,
// summed by command name ("postgres", "redis-server", "api"), with this
// process under "bench". Compared before and after a run it tells which
// process the run's work landed on, which wall-clock rates on a shared
// machine cannot. Processes that end in between drop out of the sum.
func CPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	self := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		name, ticks, ok := procCPU(d)
		if !ok {
			continue
		}
		if filepath.Base(d) == self {
			name = "bench"
		}
		out[name] += ticks
	}
	if Groups != nil {
		for g, pids := range Groups() {
			for _, pid := range pids {
				if _, ticks, ok := procCPU("/proc/" + strconv.Itoa(pid)); ok {
					out[g] += ticks
				}
			}
		}
	}
	return out
}

// Groups, when set, names more groups for CPU by their process ids, such
// as the PostgreSQL server processes of one application_name, so that a
// run's database work is told from other clients' on the same server.
var Groups func() map[string][]int

func procCPU(dir string) (string, time.Duration, bool) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return "", 0, false
	}
	name, ticks, ok := parseStat(b)
	return name, time.Duration(ticks) * clockTick, ok
}

// parseStat reads the command name and utime+stime of a /proc/PID/stat
// line: "PID (comm) S ppid ... utime stime ...", where comm may hold
// spaces and parentheses, so fields count from the last ')'.
func parseStat(b []byte) (name string, ticks int64, ok bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is the state (field 3); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return "", 0, false
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return string(b[open+1 : end]), u + s, true
}

// PerOp is the CPU time each process group spent per operation between
// two CPU() snapshots, for the groups that spent any.
func PerOp(before, after map[string]time.Duration, ops int) map[string]time.Duration {
	out := map[string]time.Duration{}
	if ops <= 0 {
		return out
	}
	for name, t := range after {
		if d := t - before[name]; d > 0 {
			out[name] = d / time.Duration(ops)
		}
	}
	return out
}
