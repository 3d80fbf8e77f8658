// Command fleet starts and stops the local fleet, and runs the demo on it.
//
//	fleet up   [--dir .fleet] [--clusters cluster1,cluster2] [--detach]
//	fleet down [--dir .fleet]
//	fleet demo [--dir .demo]  [--clusters cluster1,cluster2]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "demo":
		err = demo(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: fleet up|down|demo [flags]; fleet <command> -h for the flags")
	os.Exit(2)
}

// common are the flags of up and demo.
type common struct {
	dir      string
	bin      string
	root     string
	clusters string
	argocd   bool
	addon    bool
}

func (c *common) register(fs *flag.FlagSet, defaultDir string) {
	fs.StringVar(&c.dir, "dir", defaultDir, "run directory: kubeconfigs, logs and data")
	fs.StringVar(&c.bin, "bin", "bin", "directory of the binaries that `make tools` builds")
	fs.StringVar(&c.root, "root", ".", "the repository root (for hack/tools)")
	fs.StringVar(&c.clusters, "clusters", "cluster1,cluster2", "comma-separated managed cluster names")
	fs.BoolVar(&c.argocd, "argocd", true, "run Argo CD on the hub and the managed clusters")
	fs.BoolVar(&c.addon, "addon", true, "install argocd-pull-addon with helm and run its manager (bin/manager) and agents (bin/agent)")
}

func (c *common) start(ctx context.Context) (*fleet.Fleet, error) {
	mods, err := fleet.ResolveModuleDirs(c.root)
	if err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return nil, err
	}
	return fleet.Start(ctx, fleet.Options{
		Dir: c.dir, BinDir: bin, Clusters: strings.Split(c.clusters, ","), ArgoCD: c.argocd, Modules: mods,
		Addon: c.addon, Chart: filepath.Join(c.root, "charts", "argocd-pull-addon"),
		Progress: func(step string) { fmt.Println(step) },
	})
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	var c common
	c.register(fs, ".fleet")
	detach := fs.Bool("detach", false, "run in the background; return once the fleet is ready")
	_ = fs.Parse(args)
	if *detach {
		return upDetached(c.dir, args)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	f, err := c.start(ctx)
	if err != nil {
		return err
	}
	defer f.Stop()
	printAccess(f, c.bin)
	return waitForSignal(ctx, f)
}

// upDetached starts `fleet up` again in its own session, logging to <dir>.log, and waits
// until it has written its state file or exited.
func upDetached(dir string, args []string) error {
	if st, err := fleet.ReadState(dir); err == nil && fleet.ProcessAlive(st.Pid) {
		return fmt.Errorf("a fleet already runs from %s (pid %d); run `make fleet-down` first", dir, st.Pid)
	}
	var rest []string
	for _, a := range args {
		if a != "--detach" && a != "-detach" {
			rest = append(rest, a)
		}
	}
	logPath := strings.TrimSuffix(filepath.Clean(dir), "/") + ".log"
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"up"}, rest...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("fleet starting in the background (pid %d), log %s\n", cmd.Process.Pid, logPath)
	for {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("fleet exited (%w):\n%s", err, out)
		case <-time.After(time.Second):
			if st, err := fleet.ReadState(dir); err == nil && st.Pid == cmd.Process.Pid {
				out, _ := os.ReadFile(logPath)
				fmt.Print(string(out))
				return nil
			}
		}
	}
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fs.String("dir", ".fleet", "run directory of the fleet")
	_ = fs.Parse(args)
	st, err := fleet.ReadState(*dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no fleet runs from", *dir)
		return nil
	}
	if err != nil {
		return err
	}
	if err := syscall.Kill(st.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop fleet pid %d: %w", st.Pid, err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for fleet.ProcessAlive(st.Pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-st.Pid, syscall.SIGKILL)
			return fmt.Errorf("fleet pid %d did not stop in 90s; killed its process group", st.Pid)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = os.Remove(filepath.Join(*dir, fleet.StateFile))
	fmt.Println("fleet stopped")
	return nil
}

func printAccess(f *fleet.Fleet, bin string) {
	fmt.Println()
	fmt.Println("Kubeconfigs:")
	fmt.Printf("  hub:       export KUBECONFIG=%s\n", f.Hub.Kubeconfig)
	for _, mc := range f.Clusters {
		fmt.Printf("  %-10s export KUBECONFIG=%s\n", mc.Name+":", mc.Kubeconfig)
	}
	if f.ArgoCDServer != "" {
		fmt.Printf("Hub argocd-server: http://%s (also in %s), user admin, password:\n", f.ArgoCDServer, filepath.Join(f.Dir, fleet.ArgoCDServerFile))
		fmt.Printf("  kubectl --kubeconfig %s -n argocd get secret argocd-initial-admin-secret -o jsonpath='{.data.password}' | base64 -d\n", f.Hub.Kubeconfig)
		argocd := filepath.Join(bin, "argocd")
		fmt.Printf("  CLI: %s login %s --plaintext --username admin --password <password>; %s app get <app> --output tree\n",
			argocd, f.ArgoCDServer, argocd)
		fmt.Println("  (this build of Argo CD from its Go module embeds no web UI assets: the API and the CLI answer, the browser gets an empty page)")
	}
	fmt.Printf("Git repository: %s (path %s)\n", f.Git.URL(), fleet.GuestbookPath)
	fmt.Printf("Process logs:   %s\n", filepath.Join(f.Dir, "logs"))
}

// waitForSignal blocks until the context ends (Ctrl-C, SIGTERM) or a fleet process dies.
func waitForSignal(ctx context.Context, f *fleet.Fleet) error {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Println("stopping the fleet")
			return nil
		case <-tick.C:
			if err := f.Healthy(); err != nil {
				return fmt.Errorf("a fleet process died, stopping: %w", err)
			}
		}
	}
}
