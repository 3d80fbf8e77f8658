package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Shared is an apiserver that the envtest tests of one package share. It starts on the
// first Get, so that the package's unit tests run without it, and RunTests stops it.
type Shared struct {
	once sync.Once
	env  *Env
	err  error
}

// Get returns the shared apiserver, starting it on first use. It skips the test in -short
// mode and fails it when the apiserver cannot start.
func (s *Shared) Get(tb testing.TB) *Env {
	tb.Helper()
	if testing.Short() {
		tb.Skip("envtest: skipped in -short mode")
	}
	s.once.Do(func() { s.env, s.err = New() })
	if s.err != nil {
		tb.Fatalf("start envtest: %v", s.err)
	}
	return s.env
}

// RunTests is a TestMain body: it runs the package's tests with controller-runtime's
// logs discarded unless TEST_LOG is set, then stops the shared apiservers, and returns
// the exit code.
func RunTests(m *testing.M, shared ...*Shared) int {
	if os.Getenv("TEST_LOG") != "" {
		ctrl.SetLogger(klog.NewKlogr())
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	code := m.Run()
	for _, s := range shared {
		if s.env != nil {
			if err := s.env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop envtest:", err)
			}
		}
	}
	return code
}
