package propagation

import (
	"flag"
	"time"
)

// Settings are the propagation controllers' own settings, which the manager's flags set
// (AddFlags); DefaultSettings gives their defaults.
type Settings struct {
	// RequirePlacementBinding propagates an Application only when a PlacementDecision in
	// its namespace selects the target cluster.
	RequirePlacementBinding bool
	// OptOutGracePeriod is how long the works of an Application are kept once its
	// cluster is no longer a target: the cluster left the Application's placement, its
	// ManagedClusterAddOn is gone, or the ManagedCluster is gone. Placements, clusters
	// and opt-ins flicker (a decision page rewritten, a cluster unreachable, an addon
	// re-created by its install strategy), and deleting a work prunes the managed
	// cluster, so only a loss that lasts this long deletes them. 0 deletes them at once;
	// a negative value never deletes them for this reason.
	OptOutGracePeriod time.Duration
	// TakeOverForeignWorks makes the manager treat the pulled works that another
	// controller made for an Application (Red Hat ACM's pull controller) as its own:
	// it updates them, labels them as its own, and deletes them when they are stale.
	// Without it, an Application with such a work is left to that controller. Turn it
	// on only once the other controller no longer serves these Applications.
	TakeOverForeignWorks bool
}

// DefaultSettings returns the defaults of the settings.
func DefaultSettings() Settings {
	return Settings{RequirePlacementBinding: true, OptOutGracePeriod: time.Hour}
}

// AddFlags registers on fs a flag for each setting, its default s's.
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&s.RequirePlacementBinding, "require-placement-binding", s.RequirePlacementBinding,
		"pull an Application only when a PlacementDecision in its namespace selects the target cluster")
	fs.DurationVar(&s.OptOutGracePeriod, "opt-out-grace-period", s.OptOutGracePeriod,
		"how long the ManifestWorks of an application are kept once its cluster left its placement, opted out or is gone; 0 deletes them at once, a negative value never")
	fs.BoolVar(&s.TakeOverForeignWorks, "take-over-foreign-works", s.TakeOverForeignWorks,
		"adopt the pulled ManifestWorks that another controller (Red Hat ACM's pull controller) made; only once that controller no longer serves the applications")
}
