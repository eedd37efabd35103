package peer

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// cpuTimes is the CPU time (user and system) spent so far by the machine's Postgres and Redis
// server processes and by this process (the generator and, for turnstile, the in-process stack).
// Postgres's includes its exited backends (the postmaster's reaped children). A server not found
// in /proc (it runs elsewhere) is reported as absent.
type cpuTimes struct {
	postgres, redis, self time.Duration
	hasPostgres, hasRedis bool
}

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux
// architecture Go supports.
const clockTick = 100

// cpuReader reads CPU times. It remembers the processes that are neither Postgres nor Redis and
// does not read them again: reading every process's stat at every poll took 4% of the generator's
// process. (A remembered PID reused by a new server process would be missed; PIDs are not reused
// within a run's seconds.)
type cpuReader struct {
	other map[string]bool
}

func newCPUReader() *cpuReader { return &cpuReader{other: map[string]bool{}} }

// read reads the CPU times now.
func (r *cpuReader) read() cpuTimes {
	var c cpuTimes
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return c
	}
	for _, d := range dirs {
		name := d.Name()
		if name[0] < '0' || name[0] > '9' || r.other[name] {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat") //nolint:gosec // a process's stat file, named by the listing of /proc
		if err != nil {
			continue // the process ended meanwhile
		}
		comm, ticks, ok := parseStat(stat)
		if !ok {
			continue
		}
		switch comm {
		case "postgres":
			c.postgres += ticks * time.Second / clockTick
			c.hasPostgres = true
		case "redis-server":
			c.redis += ticks * time.Second / clockTick
			c.hasRedis = true
		default:
			r.other[name] = true
		}
	}
	return c
}

// parseStat reads a /proc/<pid>/stat line's command name and its utime, stime, cutime and cstime
// in clock ticks. The name is in parentheses and may itself hold spaces or parentheses, so the
// fields are counted from the last ')'.
func parseStat(b []byte) (comm string, ticks time.Duration, ok bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	fields := bytes.Fields(b[end+1:])
	// After the name: state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt, cminflt, majflt,
	// cmajflt, then utime, stime, cutime, cstime (fields 14-17 of proc(5)).
	if len(fields) < 15 {
		return "", 0, false
	}
	for _, f := range fields[11:15] {
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return "", 0, false
		}
		ticks += time.Duration(v)
	}
	return string(b[open+1 : end]), ticks, true
}

// between is the CPU times a fraction frac of the way from a to b, assuming they grew linearly.
func between(a, b cpuTimes, frac float64) cpuTimes {
	lerp := func(x, y time.Duration) time.Duration { return x + time.Duration(frac*float64(y-x)) }
	return cpuTimes{
		postgres: lerp(a.postgres, b.postgres), redis: lerp(a.redis, b.redis), self: lerp(a.self, b.self),
		hasPostgres: a.hasPostgres && b.hasPostgres, hasRedis: a.hasRedis && b.hasRedis,
	}
}

// CPUPerJob is the CPU time spent per job while the jobs between 10% and 90% of the run finished,
// in microseconds, by the local Postgres and Redis servers (whole servers: whatever else they did
// meanwhile too; absent when they do not run on this machine) and by the load generator's own
// process.
type CPUPerJob struct {
	Postgres *float64 `json:"postgres_us,omitempty"`
	Redis    *float64 `json:"redis_us,omitempty"`
	Process  float64  `json:"process_us"`
}

// perJob divides the CPU spent from a to b over jobs.
func perJob(a, b cpuTimes, jobs float64) CPUPerJob {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / jobs }
	out := CPUPerJob{Process: us(b.self - a.self)}
	if a.hasPostgres && b.hasPostgres {
		v := us(b.postgres - a.postgres)
		out.Postgres = &v
	}
	if a.hasRedis && b.hasRedis {
		v := us(b.redis - a.redis)
		out.Redis = &v
	}
	return out
}
