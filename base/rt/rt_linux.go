//go:build linux

package rt

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// saved is the process's scheduling before Apply, read on the calling
// thread.
type saved struct {
	attr   *unix.SchedAttr // nil: unknown, Undo sets SCHED_OTHER
	cpus   unix.CPUSet
	cpusOK bool
}

// The system calls Apply and Undo make; tests replace them to play a
// process without privileges.
var (
	setAttr     = func(tid int, a *unix.SchedAttr) error { return unix.SchedSetAttr(tid, a, 0) }
	lockAll     = func() error { return unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE) }
	setAffinity = unix.SchedSetaffinity
)

// fifo returns the attributes of SCHED_FIFO at priority p.
func fifo(p int) *unix.SchedAttr {
	return &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(p)}
}

// Apply puts every thread of the process at SCHED_FIFO s.Priority, locks
// the process's memory, current and future (mlockall), and pins every
// thread to s.CPUs when given. It returns what it did (never nil), and an
// error joining the parts it could not do, each naming the privilege it
// lacks; the parts that worked stay applied (Undo reverts them).
func Apply(s Settings) (*State, error) {
	if err := s.Check(); err != nil {
		return &State{}, err
	}
	st := &State{}
	if a, err := unix.SchedGetAttr(0, 0); err == nil {
		st.prev.attr = a
	}
	st.prev.cpusOK = unix.SchedGetaffinity(0, &st.prev.cpus) == nil
	var errs []error
	p := s.priority()
	if n, err := eachThread(func(tid int) error { return setAttr(tid, fifo(p)) }); err != nil {
		errs = append(errs, fifoError(p, err))
		if n > 0 {
			_, _ = eachThread(st.restorePolicy)
		}
	} else {
		st.Priority, st.Threads = p, n
	}
	if err := lockAll(); err != nil {
		errs = append(errs, memlockError(err))
	} else {
		st.MemoryLocked = true
	}
	if len(s.CPUs) > 0 {
		var set unix.CPUSet
		for _, c := range s.CPUs {
			set.Set(c)
		}
		if _, err := eachThread(func(tid int) error { return setAffinity(tid, &set) }); err != nil {
			errs = append(errs, fmt.Errorf("rt: pin to CPUs %s: %w (CPUs this process may use: %s)",
				FormatCPUs(s.CPUs), err, FormatCPUs(cpuList(&st.prev.cpus))))
			if st.prev.cpusOK {
				_, _ = eachThread(func(tid int) error { return setAffinity(tid, &st.prev.cpus) })
			}
		} else {
			st.CPUs = append([]int(nil), s.CPUs...)
		}
	}
	return st, errors.Join(errs...)
}

// Undo reverts what Apply did: every thread back to the calling thread's
// policy before Apply and to its CPU set, the memory unlocked.
func (st *State) Undo() error {
	var errs []error
	if st.Priority > 0 {
		if _, err := eachThread(st.restorePolicy); err != nil {
			errs = append(errs, fmt.Errorf("rt: restore the scheduling policy: %w", err))
		}
		st.Priority, st.Threads = 0, 0
	}
	if st.MemoryLocked {
		if err := unix.Munlockall(); err != nil {
			errs = append(errs, fmt.Errorf("rt: munlockall: %w", err))
		}
		st.MemoryLocked = false
	}
	if st.CPUs != nil && st.prev.cpusOK {
		if _, err := eachThread(func(tid int) error { return setAffinity(tid, &st.prev.cpus) }); err != nil {
			errs = append(errs, fmt.Errorf("rt: restore the CPU set: %w", err))
		}
		st.CPUs = nil
	}
	return errors.Join(errs...)
}

// restorePolicy sets thread tid's policy back to the one before Apply.
func (st *State) restorePolicy(tid int) error {
	a := st.prev.attr
	if a == nil {
		a = &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	}
	return unix.SchedSetAttr(tid, a, 0)
}

// eachThread calls f for every thread of the process, listing them again
// until a pass finds none new (threads that the runtime started meanwhile
// from a thread not yet done would otherwise be missed), and returns the
// number of threads done. Threads that exit meanwhile are passed over.
func eachThread(f func(tid int) error) (int, error) {
	done := map[int]bool{}
	for range 8 {
		tids, err := threads()
		if err != nil {
			return len(done), err
		}
		fresh := false
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh = true
			if err := f(tid); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue
				}
				return len(done), fmt.Errorf("thread %d: %w", tid, err)
			}
			done[tid] = true
		}
		if !fresh {
			break
		}
	}
	return len(done), nil
}

// threads lists the process's thread ids.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// fifoError explains a refused SCHED_FIFO priority.
func fifoError(p int, err error) error {
	return fmt.Errorf("rt: SCHED_FIFO priority %d: %w: needs CAP_SYS_NICE, or an RLIMIT_RTPRIO of at least %d (now %s: ulimit -r, "+
		"LimitRTPRIO= under systemd); a cgroup without real-time runtime refuses it too", p, err, p, limit(unix.RLIMIT_RTPRIO))
}

// memlockError explains a refused mlockall.
func memlockError(err error) error {
	return fmt.Errorf("rt: lock memory (mlockall): %w: needs CAP_IPC_LOCK, or an RLIMIT_MEMLOCK above the process's memory "+
		"(now %s bytes: ulimit -l, LimitMEMLOCK= under systemd)", err, limit(unix.RLIMIT_MEMLOCK))
}

// limit formats the soft limit of resource r.
func limit(r int) string {
	var l unix.Rlimit
	switch {
	case unix.Getrlimit(r, &l) != nil:
		return "unknown"
	case l.Cur == unix.RLIM_INFINITY:
		return "unlimited"
	}
	return strconv.FormatUint(l.Cur, 10)
}

// cpuList returns the CPUs of set.
func cpuList(set *unix.CPUSet) []int {
	var out []int
	for c := range maxCPUs {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}
