package appstatus

import (
	"fmt"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Settings are the status mirror's own settings; DefaultSettings gives their defaults.
// No flag sets them.
type Settings struct {
	// ProgressingHold is how long a Progressing written before Healthy stays, for an app
	// of a RollingSync ApplicationSet, so that the ApplicationSet controller sees it.
	ProgressingHold time.Duration
	// CoalesceWindow is how long after the first change of an app, on any channel, the
	// mirror reconciles it: what arrives in that window is one write. Zero means
	// DefaultCoalesceWindow.
	CoalesceWindow time.Duration
	// SettleWait is how long the mirror may hold back a state that the managed cluster
	// passes through on its own (an automatic sync about to start or running, health
	// Progressing) while no one on the hub waits for it, so that a rollout writes the hub
	// app once it settles: the hub is at most this far behind such a state. Zero means
	// argoapp.DefaultSettleWait.
	SettleWait time.Duration
}

// DefaultSettings returns the defaults of the settings.
func DefaultSettings() Settings {
	return Settings{ProgressingHold: time.Second, CoalesceWindow: DefaultCoalesceWindow, SettleWait: argoapp.DefaultSettleWait}
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	if s.ProgressingHold <= 0 {
		return fmt.Errorf("the progressing hold is %v; it must be positive", s.ProgressingHold)
	}
	if s.CoalesceWindow < 0 {
		return fmt.Errorf("the coalescing window is %v; it must not be negative", s.CoalesceWindow)
	}
	if s.SettleWait < 0 {
		return fmt.Errorf("the settle wait is %v; it must not be negative", s.SettleWait)
	}
	return nil
}
