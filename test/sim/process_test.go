package sim

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestStartProcessLogsAndStops: a process's output, after the line that names its command,
// is in <dir>/<name>.log; its exit is reported; Stop ends one that ignores SIGTERM.
func TestStartProcessLogsAndStops(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess(dir, "echo", "/bin/sh", []string{"-c", "echo $GREETING; exit 3"}, []string{"GREETING=hello"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	exited, exitErr := p.Exited()
	for !exited && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		exited, exitErr = p.Exited()
	}
	if !exited || exitErr == nil || !strings.Contains(exitErr.Error(), "exit status 3") {
		t.Fatalf("Exited() = %v, %v; want true, exit status 3", exited, exitErr)
	}
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if p.LogPath != dir+"/echo.log" || len(lines) != 2 || !strings.HasPrefix(lines[0], "=== ") ||
		!strings.HasSuffix(lines[0], "/bin/sh -c echo $GREETING; exit 3") || lines[1] != "hello" {
		t.Errorf("log %s holds %q", p.LogPath, data)
	}

	stubborn, err := StartProcess(dir, "stubborn", "/bin/sh", []string{"-c", "trap '' TERM; sleep 300"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the trap is set
	start := time.Now()
	stubborn.Stop(200 * time.Millisecond)
	if exited, _ := stubborn.Exited(); !exited || time.Since(start) > 5*time.Second {
		t.Errorf("Stop left the process running (exited %v) or took %v", exited, time.Since(start))
	}
}
