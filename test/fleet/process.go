package fleet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one component of the fleet, run as a child process with its output in
// <run dir>/logs/<name>.log. It is what a kubelet would run as a container: its own
// credentials, flags and environment.
type process struct {
	Name string
	spec processSpec
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error // the exit error, valid once done is closed
}

// processSpec says how to start a process.
type processSpec struct {
	Name string   // unique in the fleet; names the log file
	Path string   // the executable
	Args []string // its arguments
	Env  []string // added to the fleet's own environment
	Dir  string   // working directory; the run directory when empty
}

// supervisor starts and stops the fleet's processes. Processes stop in the reverse order of
// their start, so that clients stop before the servers they talk to.
type supervisor struct {
	dir   string // run directory
	mu    sync.Mutex
	procs []*process
}

func (s *supervisor) logPath(name string) string {
	return filepath.Join(s.dir, "logs", name+".log")
}

// start runs spec as a child process. The child is killed when the fleet process dies, even
// by SIGKILL, so that a crashed fleet leaves nothing behind.
func (s *supervisor) start(spec processSpec) (*process, error) {
	p, err := s.launch(spec)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

// restart stops p (SIGTERM, SIGKILL after grace), calls whileDown when it is not nil, and
// runs p's spec again, in p's place in the stop order. Its log continues in the same file.
func (s *supervisor) restart(p *process, grace time.Duration, whileDown func()) (*process, error) {
	p.stop(grace)
	if whileDown != nil {
		whileDown()
	}
	next, err := s.launch(p.spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.procs {
		if q == p {
			if err != nil {
				s.procs = append(s.procs[:i], s.procs[i+1:]...)
			} else {
				s.procs[i] = next
			}
			return next, err
		}
	}
	if err == nil {
		s.procs = append(s.procs, next)
	}
	return next, err
}

// launch starts spec as a child process that the supervisor does not track yet.
func (s *supervisor) launch(spec processSpec) (*process, error) {
	if err := os.MkdirAll(filepath.Join(s.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(s.logPath(spec.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "=== %s: %s %s\n", time.Now().Format(time.RFC3339), spec.Path, strings.Join(spec.Args, " "))
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.dir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &process{Name: spec.Name, spec: spec, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Pid is the process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// stop ends the process: SIGTERM to its process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if exited, _ := p.Exited(); exited {
		return
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// stopAll stops every process, the last started first.
func (s *supervisor) stopAll(grace time.Duration) {
	s.mu.Lock()
	procs := append([]*process(nil), s.procs...)
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(grace)
	}
}

// remove stops one process and forgets it.
func (s *supervisor) remove(p *process, grace time.Duration) {
	p.stop(grace)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.procs {
		if q == p {
			s.procs = append(s.procs[:i], s.procs[i+1:]...)
			break
		}
	}
}

// failed returns an error naming every process that exited while the fleet runs.
func (s *supervisor) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range s.procs {
		if exited, err := p.Exited(); exited {
			if err == nil {
				err = errors.New("exit status 0")
			}
			errs = append(errs, fmt.Errorf("%s exited (%w); see %s", p.Name, err, s.logPath(p.Name)))
		}
	}
	return errors.Join(errs...)
}

// pids returns the process ids of the running processes.
func (s *supervisor) pids() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for _, p := range s.procs {
		if exited, _ := p.Exited(); !exited {
			pids = append(pids, p.Pid())
		}
	}
	return pids
}

// ProcessAlive reports whether a process with that id exists.
func ProcessAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
