package sharedsettings

import "testing"

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"addon name", ValidateAddonName("argocd-pull"), ""},
		{"empty addon name", ValidateAddonName(""), "the addon name is empty"},
		{"Argo CD namespace", ValidateArgoCDNamespace("argocd"), ""},
		{"empty Argo CD namespace", ValidateArgoCDNamespace(""), "the Argo CD namespace is empty"},
		{"hub cluster name", ValidateHubClusterName("local-cluster"), ""},
		{"empty hub cluster name", ValidateHubClusterName(""), "the hub cluster name is empty"},
		{"one reconcile", ValidateConcurrency(1), ""},
		{"no reconcile", ValidateConcurrency(0), "concurrency is 0; it must be at least 1"},
		{"negative concurrency", ValidateConcurrency(-2), "concurrency is -2; it must be at least 1"},
		{"every namespace", ValidateWatchNamespaces(nil), ""},
		{"two namespaces", ValidateWatchNamespaces([]string{"a", "b"}), ""},
		{"an empty namespace", ValidateWatchNamespaces([]string{"a", ""}), "the watched namespaces include an empty name"},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: error %q, want %q", tc.name, got, tc.want)
		}
	}
}
