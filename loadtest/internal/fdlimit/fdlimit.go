package fdlimit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// nrOpenPath holds the kernel's ceiling for a process's open-file limit.
const nrOpenPath = "/proc/sys/fs/nr_open"

// Raise raises the process's open-file limit to the kernel's ceiling where it may (a process with
// CAP_SYS_RESOURCE may raise its hard limit; any process its soft limit to the hard one, which the
// Go runtime does at start-up) and returns the soft limit it has then.
func Raise() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("open-file limit: %w", err)
	}
	if ceiling, err := nrOpen(); err == nil && ceiling > lim.Max {
		raised := syscall.Rlimit{Cur: ceiling, Max: ceiling}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return ceiling, nil
		}
	}
	if lim.Cur < lim.Max {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return lim.Cur, fmt.Errorf("open-file limit: %w", err)
		}
		return lim.Max, nil
	}
	return lim.Cur, nil
}

func nrOpen() (uint64, error) {
	b, err := os.ReadFile(nrOpenPath)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// Spare is what Need adds for everything but the streams and posts: the stack's Postgres, Redis
// and Kafka connections, listeners and files, with room to spare.
const Spare = 1000

// Need is how many file descriptors a run holds at its peak with backlog turns outstanding,
// turnsPerSession to a session, window sessions receiving turns besides, and posts requests in
// flight at once: one a followed session's stream and one a post, twice each when the stack runs
// in this process (the server's end of each connection), and Spare.
func Need(backlog float64, turnsPerSession, window, posts int, inProcess bool) int {
	streams := int(backlog/float64(max(turnsPerSession, 1))+0.5) + window
	ends := 1
	if inProcess {
		ends = 2
	}
	return ends*(streams+posts) + Spare
}

// Fits reports, as an error saying what to do, whether need file descriptors fit in limit (a
// limit of 0 is unknown, and fits).
func Fits(need int, limit uint64) error {
	if limit == 0 || uint64(max(need, 0)) <= limit {
		return nil
	}
	return fmt.Errorf("needs about %d open files in this process, above its limit of %d: raise the limit (ulimit -n, or run as a user that may raise it: the generator raises it as far as it may)", need, limit)
}

// MaxTurnsPerSession is the most turns to a session TurnsPerSessionThatFits offers.
const MaxTurnsPerSession = 64

// TurnsPerSessionThatFits is the fewest turns to a session, above from and at most
// MaxTurnsPerSession, at which Need for the rest of the arguments fits limit; false if none does.
func TurnsPerSessionThatFits(backlog float64, from, window, posts int, inProcess bool, limit uint64) (int, bool) {
	for k := max(from, 0) + 1; k <= MaxTurnsPerSession; k++ {
		if Fits(Need(backlog, k, window, posts, inProcess), limit) == nil {
			return k, true
		}
	}
	return 0, false
}
