package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// goMemory is the Go heap's live objects and goroutine stacks after two
// collections (the second frees what sync.Pools kept through the first):
// what this process holds for the streams it serves.
func goMemory() int64 {
	runtime.GC()
	runtime.GC()
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
	metrics.Read(samples)
	var total int64
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			total += int64(s.Value.Uint64())
		}
	}
	return total
}

// clockTicks is USER_HZ, the unit of CPU times in /proc/<pid>/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procStat is what tandem bench reads of another process in /proc.
type procStat struct {
	ppid int
	cpu  time.Duration // user + system
	rss  int64         // bytes
}

// readProcStat reads /proc/<pid>/stat and /proc/<pid>/statm.
func readProcStat(pid int) (procStat, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return procStat{}, err
	}
	st, err := parseStat(string(stat))
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	statm, err := os.ReadFile(filepath.Join(dir, "statm"))
	if err != nil {
		return procStat{}, err
	}
	fields := strings.Fields(string(statm))
	if len(fields) < 2 {
		return procStat{}, fmt.Errorf("/proc/%d/statm: %q", pid, statm)
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/statm: %w", pid, err)
	}
	st.rss = pages * int64(os.Getpagesize())
	return st, nil
}

// parseStat reads the parent and the CPU times from the text of
// /proc/<pid>/stat. The command name may hold spaces and parentheses, so
// fields are counted from its closing parenthesis.
func parseStat(stat string) (procStat, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(fields) < 13 {
		return procStat{}, fmt.Errorf("%d fields after the command name", len(fields))
	}
	var n [3]int64
	for k, idx := range []int{1, 11, 12} {
		v, err := strconv.ParseInt(fields[idx], 10, 64)
		if err != nil {
			return procStat{}, err
		}
		n[k] = v
	}
	return procStat{ppid: int(n[0]), cpu: time.Duration(n[1]+n[2]) * time.Second / clockTicks}, nil
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(child); err == nil && st.ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}

// raiseFileLimit lets this process (and the processes it starts) open want
// files, raising the hard limit too when permitted. It returns the soft
// limit in force.
func raiseFileLimit(want uint64) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur >= want {
		return lim.Cur
	}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: max(want, lim.Max)}) == nil {
		return want
	}
	lim.Cur = lim.Max
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	return lim.Cur
}
