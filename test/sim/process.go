package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
)

// Process is a binary the simulation runs as a process, as a kubelet would run its
// container: the addon-manager or an agent.
type Process struct {
	*fleet.ChildProcess
	Name string
	// LogPath is the file its output is appended to.
	LogPath string
}

// StartProcess starts path with args and the extra environment; its output goes to
// <dir>/<name>.log. The process dies with the caller.
func StartProcess(dir, name, path string, args, env []string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	child, err := fleet.StartChildProcess(name, logPath, cmd)
	if err != nil {
		return nil, err
	}
	return &Process{ChildProcess: child, Name: name, LogPath: logPath}, nil
}

// PeakRSS returns the peak resident set size of the running process (VmHWM), in bytes.
func (p *Process) PeakRSS() (int64, error) { return procStatusBytes(p.Pid(), "VmHWM:") }

// FileRSS returns the part of the resident set of the running process that maps files
// (RssFile): the pages of its binary that it has touched, which the kernel may drop and
// read again; the rest is its memory.
func (p *Process) FileRSS() (int64, error) { return procStatusBytes(p.Pid(), "RssFile:") }

// RSS returns the resident set size of the running process (VmRSS), in bytes.
func (p *Process) RSS() (int64, error) { return procStatusBytes(p.Pid(), "VmRSS:") }

func procStatusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, field) {
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, field))
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected %q in /proc/%d/status", line, pid)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// ManagerMemoryLimit is the chart's default memory limit of the manager (512Mi), which
// the chart's Deployment passes to the Go runtime as GOMEMLIMIT, and ManagerGOGC the GOGC
// it sets (values goGC); StartManager sets both, as the chart does (test/chart checks
// that they are the chart's).
const (
	ManagerMemoryLimit = 512 << 20
	ManagerGOGC        = 50
)

// ManagerEnv is the manager's Go runtime environment as the chart's Deployment sets it.
func ManagerEnv() []string {
	return []string{"GOMEMLIMIT=" + strconv.Itoa(ManagerMemoryLimit), "GOGC=" + strconv.Itoa(ManagerGOGC)}
}

// Manager is the addon-manager running as a process.
type Manager struct {
	*Process
	// MetricsAddr and PprofAddr are where its metrics and pprof listen.
	MetricsAddr, PprofAddr string
}

// StartManager starts the addon-manager binary against the hub with kubeconfig, with
// leader election on as the chart deploys it, and waits until it is ready. args are added
// to the flags.
func StartManager(ctx context.Context, dir, binary, kubeconfig string, args ...string) (*Manager, error) {
	ports, err := loopback.FreePorts(3)
	if err != nil {
		return nil, err
	}
	probe := fmt.Sprintf("127.0.0.1:%d", ports[0])
	m := &Manager{MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]), PprofAddr: fmt.Sprintf("127.0.0.1:%d", ports[2])}
	flags := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=true", "--leader-election-namespace=" + ManagerNamespace,
		// The bench reads the metrics on loopback; the chart serves them over HTTPS behind
		// authentication (test/chart proves that).
		"--health-probe-bind-address=" + probe, "--metrics-bind-address=" + m.MetricsAddr, "--metrics-secure=false",
		"--pprof-bind-address=" + m.PprofAddr,
	}, args...)
	if m.Process, err = StartProcess(dir, "manager", binary, flags, ManagerEnv()); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, m.Process, "http://"+probe+"/readyz"); err != nil {
		m.Kill()
		return nil, err
	}
	return m, nil
}

// waitReady polls url until it answers 200, or the process exits.
func waitReady(ctx context.Context, p *Process, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if exited, err := p.Exited(); exited {
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("%s exited before it was ready: %w (see its log)", p.Name, err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w", p.Name, url, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
