package clustersecret

import "flag"

// Settings are the controller's own settings, which the manager's flags set (AddFlags);
// DefaultSettings gives their defaults.
type Settings struct {
	// Enabled runs the controller. Off, it does not run, and the Secrets it made before
	// stay until someone deletes them (the chart then grants no right on them).
	Enabled bool
}

// DefaultSettings returns the defaults of the settings.
func DefaultSettings() Settings {
	return Settings{Enabled: true}
}

// AddFlags registers on fs a flag for each setting, its default s's.
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&s.Enabled, "cluster-secrets", s.Enabled,
		"keep an Argo CD cluster Secret per opted-in cluster in the Argo CD namespace (a cluster that already has a cluster Secret of another tool never gets a second one); false keeps none and touches none, leaving the ones made before")
}
