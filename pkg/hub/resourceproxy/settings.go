package resourceproxy

import (
	"errors"
	"flag"
)

// Settings are the resource proxy's own settings, which the manager's flags set
// (AddFlags); DefaultSettings gives their defaults.
type Settings struct {
	// Addr is the bind address of the aggregated API's HTTPS server; "0" turns the
	// resource proxy off (and the Argo CD cluster Secrets carry no server to reach it).
	Addr string
	// Namespace is the manager's namespace, which holds the Service; empty means the
	// namespace of the manager's Pod (its service account's).
	Namespace string
	// Service names the Service in the manager's namespace through which the hub
	// apiserver reaches Addr (the APIService's), for the serving certificate's names.
	Service string
	// ClientTokenSecret names the Secret, in the hub Argo CD's namespace, of type
	// kubernetes.io/service-account-token, whose token the Argo CD cluster Secrets carry:
	// the identity with which argocd-server calls clusters/proxy.
	ClientTokenSecret string
	// HubServer is the hub apiserver's URL as argocd-server reaches it; empty means the
	// manager's own (the in-cluster one).
	HubServer string
}

// Disabled as Settings.Addr turns the resource proxy off.
const Disabled = "0"

// DefaultSettings returns the defaults, those of the chart.
func DefaultSettings() Settings {
	return Settings{Addr: ":9444", Service: "argocd-pull-resource-proxy",
		ClientTokenSecret: "argocd-pull-resource-proxy-token"}
}

// Enabled reports whether the resource proxy runs.
func (s Settings) Enabled() bool { return s.Addr != Disabled }

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	if !s.Enabled() {
		return nil
	}
	var errs []error
	if s.Service == "" || s.ClientTokenSecret == "" {
		errs = append(errs, errors.New("resource proxy: the Service and the client token Secret must be named"))
	}
	return errors.Join(errs...)
}

// AddFlags registers on fs a flag for each setting, its default s's.
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Addr, "resource-proxy-bind-address", s.Addr,
		`address of the resource proxy's aggregated API (live manifests, events, logs and actions of pulled apps from the hub's Argo CD); "0" turns it off`)
	fs.StringVar(&s.Namespace, "resource-proxy-namespace", s.Namespace, "the manager's namespace, which holds the resource proxy's Service; empty: the manager Pod's")
	fs.StringVar(&s.Service, "resource-proxy-service", s.Service, "Service of the resource proxy's APIService, in the manager's namespace (the serving certificate's name)")
	fs.StringVar(&s.ClientTokenSecret, "resource-proxy-client-token-secret", s.ClientTokenSecret,
		"service account token Secret, in the Argo CD namespace, with which argocd-server calls the resource proxy (the Argo CD cluster Secrets carry it)")
	fs.StringVar(&s.HubServer, "resource-proxy-hub-server", s.HubServer, "the hub apiserver's URL as argocd-server reaches it; empty means the manager's own")
}
