package addon

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Settings are the addon's own settings: the agent it deploys to each cluster, and what
// each cluster's agent may hold on the hub. The manager's flags set them (AddFlags);
// DefaultSettings gives their defaults.
type Settings struct {
	// AgentImage is the agent's image, before the registry overrides of the
	// AddOnDeploymentConfig and of the ManagedCluster's image-registries annotation.
	AgentImage string
	// AgentImagePullPolicy is the agent container's imagePullPolicy; empty means
	// IfNotPresent.
	AgentImagePullPolicy corev1.PullPolicy
	// AgentImagePullSecrets name Secrets in the agent's install namespace on each managed
	// cluster that its Pod pulls the image with. OCM's klusterlet copies its
	// open-cluster-management-image-pull-credentials into every addon namespace.
	AgentImagePullSecrets []string
	// WatchNamespaces are the namespaces of the managed clusters' Argo CD Applications.
	WatchNamespaces []string
	// MaxStatusSlicesPerCluster, when above 0, bounds the ApplicationStatusSlices of each
	// cluster's agent with a ResourceQuota (sliceQuota); 0 keeps no quota.
	MaxStatusSlicesPerCluster int
}

// DefaultAgentImage is the agent's image unless a flag or a registry override says
// otherwise: the release's image, whose tag is the chart's appVersion (test/chart checks).
const DefaultAgentImage = "quay.io/ocm-gitops/argocd-pull-addon:0.1.0"

// DefaultSettings returns the defaults of the settings.
func DefaultSettings() Settings {
	return Settings{
		AgentImage:           DefaultAgentImage,
		AgentImagePullPolicy: corev1.PullIfNotPresent,
		WatchNamespaces:      []string{"argocd"},
		// What one cluster may store on the hub: docs/operations.md.
		MaxStatusSlicesPerCluster: RecommendedMaxStatusSlicesPerCluster,
	}
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	var errs []error
	if s.AgentImage == "" {
		errs = append(errs, errors.New("the agent image is empty"))
	}
	switch s.AgentImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("the agent image pull policy %q is not Always, IfNotPresent or Never", s.AgentImagePullPolicy))
	}
	if len(s.WatchNamespaces) == 0 {
		errs = append(errs, errors.New("the agent watches no namespace"))
	}
	if s.MaxStatusSlicesPerCluster < 0 {
		errs = append(errs, fmt.Errorf("the status slices per cluster are %d; they must be 0 (no quota) or more", s.MaxStatusSlicesPerCluster))
	}
	return errors.Join(errs...)
}

// AddFlags registers on fs a flag for each setting, its default s's. The flags of the
// lists take them comma-separated: once fs is parsed, the function it returns sets them.
func (s *Settings) AddFlags(fs *flag.FlagSet) (parsed func()) {
	pullSecrets, watchNamespaces := strings.Join(s.AgentImagePullSecrets, ","), strings.Join(s.WatchNamespaces, ",")
	fs.StringVar(&s.AgentImage, "agent-image", s.AgentImage, "image of the agent deployed to each managed cluster")
	fs.StringVar((*string)(&s.AgentImagePullPolicy), "agent-image-pull-policy", string(s.AgentImagePullPolicy),
		"imagePullPolicy of the agent: Always, IfNotPresent or Never")
	fs.StringVar(&pullSecrets, "agent-image-pull-secrets", pullSecrets,
		"comma-separated Secrets in the agent's namespace on each managed cluster to pull its image with")
	fs.StringVar(&watchNamespaces, "agent-watch-namespaces", watchNamespaces,
		"comma-separated namespaces of the managed clusters' Argo CD Applications")
	fs.IntVar(&s.MaxStatusSlicesPerCluster, "max-status-slices-per-cluster", s.MaxStatusSlicesPerCluster,
		"the most ApplicationStatusSlices one cluster's agent may hold on the hub (a ResourceQuota in its cluster namespace; docs/operations.md); 0 keeps no quota, and no bound")
	return func() {
		if pullSecrets != "" {
			s.AgentImagePullSecrets = strings.Split(pullSecrets, ",")
		}
		s.WatchNamespaces = strings.Split(watchNamespaces, ",")
	}
}
