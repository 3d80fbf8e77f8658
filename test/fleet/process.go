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

// ChildProcess is a process started with its output appended to a log file, in a process
// group of its own, which Stop and Kill signal. It is killed when the process that
// started it dies, even by SIGKILL, so that a crashed fleet or test leaves nothing
// behind. The fleet runs its components as child processes (supervisor), and so do the
// simulation and the benchmark (test/sim).
type ChildProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit error, valid once done is closed
}

// StartChildProcess starts cmd, called name in its error, with its output appended to
// logPath after a line with the time and the command line.
func StartChildProcess(name, logPath string, cmd *exec.Cmd) (*ChildProcess, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "=== %s: %s\n", time.Now().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &ChildProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *ChildProcess) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Pid is the process id.
func (p *ChildProcess) Pid() int { return p.cmd.Process.Pid }

// Stop ends the process as a kubelet does: SIGTERM to its process group, then SIGKILL
// after grace.
func (p *ChildProcess) Stop(grace time.Duration) {
	if exited, _ := p.Exited(); exited {
		return
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill kills the process group with SIGKILL, as an OOM kill or a node loss would, and
// waits for the process.
func (p *ChildProcess) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

// process is one component of the fleet, run as a child process with its output in
// <run dir>/logs/<name>.log. It is what a kubelet would run as a container: its own
// credentials, flags and environment.
type process struct {
	*ChildProcess
	Name string
	spec processSpec
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
	p.Stop(grace)
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
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.dir
	}
	child, err := StartChildProcess(spec.Name, s.logPath(spec.Name), cmd)
	if err != nil {
		return nil, err
	}
	return &process{ChildProcess: child, Name: spec.Name, spec: spec}, nil
}

// stopAll stops every process, the last started first.
func (s *supervisor) stopAll(grace time.Duration) {
	s.mu.Lock()
	procs := append([]*process(nil), s.procs...)
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(grace)
	}
}

// remove stops one process and forgets it.
func (s *supervisor) remove(p *process, grace time.Duration) {
	p.Stop(grace)
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
