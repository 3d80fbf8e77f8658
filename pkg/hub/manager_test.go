package hub

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestLeaderElectionOptions(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("the defaults are invalid: %v", err)
	}
	for _, tt := range []struct {
		name                                string
		leaseDuration, renewDeadline, retry time.Duration
		leaderElect, wantErr                bool
	}{
		{"OCM's timing", 137 * time.Second, 107 * time.Second, 26 * time.Second, true, false},
		{"controller-runtime's timing", 15 * time.Second, 10 * time.Second, 2 * time.Second, true, false},
		{"renew deadline not under the lease duration", 10 * time.Second, 10 * time.Second, 2 * time.Second, true, true},
		{"retry period too close to the renew deadline", 15 * time.Second, 10 * time.Second, 9 * time.Second, true, true},
		{"no retry period", 15 * time.Second, 10 * time.Second, 0, true, true},
		{"no leader election", 0, 0, 0, false, false},
	} {
		opts := DefaultOptions()
		opts.LeaderElect, opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = tt.leaderElect, tt.leaseDuration, tt.renewDeadline, tt.retry
		err := opts.Validate()
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: Validate() = %v, want error %v", tt.name, err, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "leader election") {
			t.Errorf("%s: the error %q does not name the leader election", tt.name, err)
		}
	}
}

// expectValid checks, for each value, that the default options with set(value) are
// valid or not, as values says.
func expectValid[T comparable](t *testing.T, option string, values map[T]bool, set func(*Options, T)) {
	t.Helper()
	for value, valid := range values {
		opts := DefaultOptions()
		set(&opts, value)
		if err := opts.Validate(); (err == nil) != valid {
			t.Errorf("%s %#v: Validate() = %v, want valid %v", option, value, err, valid)
		}
	}
}

func TestAgentImagePullPolicyOption(t *testing.T) {
	expectValid(t, "pull policy", map[string]bool{"Always": true, "IfNotPresent": true, "Never": true, "": false, "always": false},
		func(o *Options, policy string) { o.Addon.AgentImagePullPolicy = corev1.PullPolicy(policy) })
}

func TestReportBudgetOption(t *testing.T) {
	if got := DefaultOptions().AppSetReportOptions().BudgetBytes; got != 1<<20 {
		t.Errorf("the default report budget is %d bytes, want 1 MiB", got)
	}
	expectValid(t, "report budget", map[int64]bool{1 << 20: true, 64 << 10: true, 64<<10 - 1: false, 0: false, -1: false},
		func(o *Options, budget int64) { o.AppSetReport.BudgetBytes = budget })
}

// pprof, which has no authentication, binds to loopback only.
func TestPprofOnLoopbackOnly(t *testing.T) {
	expectValid(t, "pprof address", map[string]bool{"0": true, "127.0.0.1:6060": true, "[::1]:6060": true, ":6060": false, "0.0.0.0:6060": false},
		func(o *Options, addr string) { o.PprofAddr = addr })
}
