package appstatus

import (
	"fmt"
	"time"
)

// Settings are the status mirror's own settings; DefaultSettings gives their defaults.
// No flag sets them.
type Settings struct {
	// ProgressingHold is how long a Progressing written before Healthy stays, so that
	// the ApplicationSet controller's RollingSync sees it.
	ProgressingHold time.Duration
}

// DefaultSettings returns the defaults of the settings.
func DefaultSettings() Settings {
	return Settings{ProgressingHold: time.Second}
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	if s.ProgressingHold <= 0 {
		return fmt.Errorf("the progressing hold is %v; it must be positive", s.ProgressingHold)
	}
	return nil
}
