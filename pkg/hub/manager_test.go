package hub

import (
	"strings"
	"testing"
	"time"
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

func TestAgentImagePullPolicyOption(t *testing.T) {
	for policy, valid := range map[string]bool{"Always": true, "IfNotPresent": true, "Never": true, "": false, "always": false} {
		opts := DefaultOptions()
		opts.AgentImagePullPolicy = policy
		if err := opts.Validate(); (err == nil) != valid {
			t.Errorf("pull policy %q: Validate() = %v, want valid %v", policy, err, valid)
		}
	}
}

func TestReportBudgetOption(t *testing.T) {
	if got := DefaultOptions().AppSetReportOptions().BudgetBytes; got != 1<<20 {
		t.Errorf("the default report budget is %d bytes, want 1 MiB", got)
	}
	for budget, valid := range map[int64]bool{1 << 20: true, 64 << 10: true, 64<<10 - 1: false, 0: false, -1: false} {
		opts := DefaultOptions()
		opts.ReportBudgetBytes = budget
		if err := opts.Validate(); (err == nil) != valid {
			t.Errorf("report budget %d: Validate() = %v, want valid %v", budget, err, valid)
		}
	}
}

// pprof, which has no authentication, binds to loopback only.
func TestPprofOnLoopbackOnly(t *testing.T) {
	for addr, valid := range map[string]bool{"0": true, "127.0.0.1:6060": true, "[::1]:6060": true, ":6060": false, "0.0.0.0:6060": false} {
		opts := DefaultOptions()
		opts.PprofAddr = addr
		if err := opts.Validate(); (err == nil) != valid {
			t.Errorf("pprof address %q: Validate() = %v, want valid %v", addr, err, valid)
		}
	}
}
