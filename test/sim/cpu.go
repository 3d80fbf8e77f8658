package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of the CPU times in /proc/<pid>/stat.
const clockTicks = 100

// CPU is the CPU time, user and system, in seconds, that processes used, by name.
type CPU map[string]float64

// ProcessCPU returns the CPU time of this process, of its child processes (the
// apiserver and etcd that test/testenv starts, the manager and the agent), by command
// name; processes of the same name add up.
func ProcessCPU() (CPU, error) {
	self := os.Getpid()
	cpu := CPU{}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		pid, name, ppid, seconds, err := parseStat(string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if pid == self {
			name = "bench (stand-ins)"
		} else if ppid != self {
			continue
		}
		cpu[name] += seconds
	}
	return cpu, nil
}

// parseStat reads the pid, command name, parent pid and CPU seconds (utime+stime) of a
// /proc/<pid>/stat line. The name is in parentheses and may hold spaces.
func parseStat(line string) (pid int, name string, ppid int, seconds float64, err error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return 0, "", 0, 0, fmt.Errorf("malformed stat %q", line)
	}
	if pid, err = strconv.Atoi(strings.TrimSpace(line[:open])); err != nil {
		return 0, "", 0, 0, err
	}
	name = line[open+1 : end]
	// After the name: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime ...
	fields := strings.Fields(line[end+1:])
	if len(fields) < 13 {
		return 0, "", 0, 0, fmt.Errorf("short stat %q", line)
	}
	if ppid, err = strconv.Atoi(fields[1]); err != nil {
		return 0, "", 0, 0, err
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, "", 0, 0, fmt.Errorf("malformed times in %q", line)
	}
	return pid, name, ppid, (utime + stime) / clockTicks, nil
}

// Since returns the CPU time used since before, by name.
func (c CPU) Since(before CPU) CPU {
	return positiveDifference(c, before)
}

func (c CPU) String() string {
	var parts []string
	for _, name := range []string{"kube-apiserver", "etcd", "manager", "bench (stand-ins)"} {
		parts = append(parts, fmt.Sprintf("%s %.0f s", name, c[name]))
	}
	return strings.Join(parts, ", ")
}
