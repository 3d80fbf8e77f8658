package appsetreport

import (
	"flag"
	"fmt"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Settings are the ApplicationSet report controller's own settings, which the manager's
// flags set (AddFlags); DefaultSettings gives their defaults.
type Settings struct {
	// WriteInterval paces the writes of one report: after writeBurst writes in a row,
	// one per interval; the changes in between go into the next write. A report of a
	// thousand clusters is hundreds of kilobytes, and every app of the ApplicationSet
	// changes it while it rolls out. An isolated change is written at once, even just
	// after a write. Negative means no limit. The interval also grows to writeCostFactor
	// times the last write's duration, so that a busy apiserver spends at most about a
	// tenth of its time on each report.
	WriteInterval time.Duration
	// BudgetBytes bounds each report: the most bytes it may take as JSON, metadata
	// included. A report that does not fit at full detail is cut (CutToBudget), its
	// counts exact. At least MinBudgetBytes; etcd refuses objects over about 1.5 MiB.
	BudgetBytes int64
	// SettleWait is how long a report may wait while its apps pass through states that
	// their clusters leave on their own (an automatic sync about to start or running,
	// health Progressing) and nothing else changed in it (its apps, their errors): a
	// rollout is then written when it settles, or once per SettleWait while it lasts.
	// Zero: every change is written at once.
	SettleWait time.Duration
}

// DefaultSettings returns the defaults of the settings. The budget, 1 MiB, stays a third
// below etcd's default limit of 1.5 MiB per object, for what other writers may add
// (labels, annotations, their managedFields).
func DefaultSettings() Settings {
	return Settings{WriteInterval: time.Second, BudgetBytes: 1 << 20, SettleWait: argoapp.DefaultSettleWait}
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	if s.BudgetBytes < MinBudgetBytes {
		return fmt.Errorf("the report budget is %d bytes; it must be at least %d", s.BudgetBytes, MinBudgetBytes)
	}
	if s.SettleWait < 0 {
		return fmt.Errorf("the report settle wait is %v; it must not be negative", s.SettleWait)
	}
	return nil
}

// AddFlags registers on fs a flag for each setting, its default s's.
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	fs.DurationVar(&s.WriteInterval, "report-write-interval", s.WriteInterval,
		"the pace of the writes of one MulticlusterApplicationSetReport: after five writes in a row, one per interval; changes in between go into the next write")
	fs.Int64Var(&s.BudgetBytes, "report-budget-bytes", s.BudgetBytes,
		"the most bytes one MulticlusterApplicationSetReport may take as JSON, metadata included; a report over it loses detail (its counts stay exact) and says so in statuses.summary.truncated")
	fs.DurationVar(&s.SettleWait, "report-settle-wait", s.SettleWait,
		"how long a MulticlusterApplicationSetReport may wait while its apps pass through states their clusters leave on their own (a sync running, health Progressing) and nothing else in it changed; 0 writes every change at once")
}
