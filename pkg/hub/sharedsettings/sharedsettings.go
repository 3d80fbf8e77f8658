// Package sharedsettings holds the rules for the settings that pkg/hub defines once and
// hands to several controllers (docs/design.md, section 2.1): the addon's name, the hub
// Argo CD's namespace, the hub's own cluster name, the number of parallel reconciles and
// the watched namespaces. hub.Options.Validate and each controller's Setup check the
// ones they use by these rules, so that a bad setting is refused the same way, in the
// same words, wherever it is found.
//
// Each function returns nil for a valid value, so that a validation joins them:
// errors.Join(sharedsettings.ValidateAddonName(o.AddonName), ...).
package sharedsettings

import (
	"errors"
	"fmt"
	"slices"
)

// ValidateAddonName refuses an empty addon name.
func ValidateAddonName(name string) error {
	if name == "" {
		return errors.New("the addon name is empty")
	}
	return nil
}

// ValidateArgoCDNamespace refuses an empty namespace of the hub Argo CD.
func ValidateArgoCDNamespace(namespace string) error {
	if namespace == "" {
		return errors.New("the Argo CD namespace is empty")
	}
	return nil
}

// ValidateHubClusterName refuses an empty name of the hub's own ManagedCluster.
func ValidateHubClusterName(name string) error {
	if name == "" {
		return errors.New("the hub cluster name is empty")
	}
	return nil
}

// ValidateConcurrency refuses fewer than one parallel reconcile.
func ValidateConcurrency(concurrency int) error {
	if concurrency < 1 {
		return fmt.Errorf("concurrency is %d; it must be at least 1", concurrency)
	}
	return nil
}

// ValidateWatchNamespaces refuses an empty name among the watched namespaces (none at
// all means every namespace).
func ValidateWatchNamespaces(namespaces []string) error {
	if slices.Contains(namespaces, "") {
		return errors.New("the watched namespaces include an empty name")
	}
	return nil
}
