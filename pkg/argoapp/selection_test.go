package argoapp

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestIsPullRequested(t *testing.T) {
	cluster := map[string]string{AnnotationOCMManagedCluster: "east-1"}
	pull := func(value string) map[string]string {
		return map[string]string{LabelPullToOCMManagedCluster: value}
	}
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        bool
		wantErr     bool
	}{
		{name: "true with cluster", labels: pull("true"), annotations: cluster, want: true},
		{name: "True with cluster", labels: pull("True"), annotations: cluster, want: true},
		{name: "1 with cluster", labels: pull("1"), annotations: cluster, want: true},
		{name: "false with cluster", labels: pull("false"), annotations: cluster},
		{name: "0 with cluster", labels: pull("0"), annotations: cluster},
		{name: "true without cluster", labels: pull("true")},
		{name: "true with empty cluster", labels: pull("true"), annotations: map[string]string{AnnotationOCMManagedCluster: ""}},
		{name: "no label", annotations: cluster},
		{name: "nil maps"},
		{name: "yes is malformed", labels: pull("yes"), annotations: cluster, wantErr: true},
		{name: "empty value is malformed", labels: pull(""), annotations: cluster, wantErr: true},
		{name: "malformed without cluster", labels: pull("on"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IsPullRequested(tt.labels, tt.annotations)
			if tt.wantErr != errors.Is(err, ErrMalformedPullLabel) {
				t.Fatalf("error = %v, want one wrapping ErrMalformedPullLabel: %v", err, tt.wantErr)
			}
			if !tt.wantErr && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want {
				t.Errorf("IsPullRequested() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsReconcileSkipped(t *testing.T) {
	tests := map[string]bool{"true": true, "True": true, "1": true, "false": false, "yes": false, "": false}
	for value, want := range tests {
		if got := IsReconcileSkipped(map[string]string{AnnotationSkipReconcile: value}); got != want {
			t.Errorf("IsReconcileSkipped(%q) = %v, want %v", value, got, want)
		}
	}
	if IsReconcileSkipped(nil) {
		t.Error("IsReconcileSkipped(nil) = true")
	}
}

func TestOwningApplicationSet(t *testing.T) {
	tests := []struct {
		name   string
		refs   []metav1.OwnerReference
		want   string
		wantOK bool
	}{
		{name: "none"},
		{
			name:   "argo applicationset",
			refs:   []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "guestbook"}},
			want:   "guestbook",
			wantOK: true,
		},
		{
			name: "after another owner",
			refs: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"},
				{APIVersion: "argoproj.io/v1beta1", Kind: "ApplicationSet", Name: "shop"},
			},
			want:   "shop",
			wantOK: true,
		},
		{name: "other group", refs: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "ApplicationSet", Name: "x"}}},
		{name: "other kind", refs: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "AppProject", Name: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := OwningApplicationSet(tt.refs)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("OwningApplicationSet() = %q, %v, want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSyncsByRollingSync(t *testing.T) {
	steps := []any{map[string]any{"matchExpressions": []any{}}}
	tests := []struct {
		name     string
		strategy map[string]any
		want     bool
	}{
		{name: "no strategy"},
		{name: "AllAtOnce", strategy: map[string]any{"type": "AllAtOnce"}},
		{name: "RollingSync with steps", strategy: map[string]any{"type": "RollingSync", "rollingSync": map[string]any{"steps": steps}}, want: true},
		{name: "RollingSync without steps", strategy: map[string]any{"type": "RollingSync", "rollingSync": map[string]any{}}},
		{name: "RollingSync without rollingSync", strategy: map[string]any{"type": "RollingSync"}},
		{name: "steps of another type", strategy: map[string]any{"type": "AllAtOnce", "rollingSync": map[string]any{"steps": steps}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			appSet := NewApplicationSet()
			appSet.Object["spec"] = map[string]any{}
			if tt.strategy != nil {
				appSet.Object["spec"] = map[string]any{"strategy": tt.strategy}
			}
			if got := SyncsByRollingSync(appSet); got != tt.want {
				t.Errorf("SyncsByRollingSync = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestApplicationSetHash(t *testing.T) {
	// The hex SHA-1 of "openshift-gitops/guestbook-allclusters-app-set" (sha1sum), the
	// value existing pull systems put on their works.
	const want = "7c56220e0df8e95192c72aa775ed8d4bd9fe807f"
	got := ApplicationSetHash("openshift-gitops", "guestbook-allclusters-app-set")
	if got != want {
		t.Errorf("ApplicationSetHash() = %q, want %q", got, want)
	}
	if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
		t.Errorf("hash %q is not a valid label value: %v", got, errs)
	}
	if ApplicationSetHash("ns", "a") == ApplicationSetHash("ns", "b") {
		t.Error("distinct ApplicationSets share a hash")
	}
	if got := ApplicationSetKey("ns", "a"); got != "ns/a" {
		t.Errorf("ApplicationSetKey() = %q, want ns/a", got)
	}
}

func TestPullLabelValue(t *testing.T) {
	tests := []struct {
		labels  map[string]string
		want    bool
		wantErr bool
	}{
		{labels: nil},
		{labels: map[string]string{LabelPullToOCMManagedCluster: "true"}, want: true},
		{labels: map[string]string{LabelPullToOCMManagedCluster: "FALSE"}},
		{labels: map[string]string{LabelPullToOCMManagedCluster: "yes"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := PullLabelValue(tt.labels)
		if tt.wantErr != errors.Is(err, ErrMalformedPullLabel) || (!tt.wantErr && err != nil) {
			t.Errorf("PullLabelValue(%v) error = %v, want malformed: %v", tt.labels, err, tt.wantErr)
		}
		if got != tt.want {
			t.Errorf("PullLabelValue(%v) = %v, want %v", tt.labels, got, tt.want)
		}
	}
}

func TestProjectPermitsNamespace(t *testing.T) {
	project := NewAppProject()
	project.SetName("team-a")
	if err := unstructured.SetNestedStringSlice(project.Object, []string{"team-a", "shared-*", "/^ci-[0-9]+$/"}, "spec", "sourceNamespaces"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		namespace string
		want      bool
	}{
		{"argocd", true}, // the Argo CD namespace may use any project
		{"team-a", true},
		{"shared-tools", true},
		{"ci-42", true},
		{"ci-x", false},
		{"team-b", false},
		{"team-a-evil", false},
	} {
		if got := ProjectPermitsNamespace(project, tc.namespace, "argocd"); got != tc.want {
			t.Errorf("ProjectPermitsNamespace(%q) = %v, want %v", tc.namespace, got, tc.want)
		}
	}
	if ProjectPermitsNamespace(NewAppProject(), "team-a", "argocd") {
		t.Error("a project without sourceNamespaces permits another namespace than Argo CD's")
	}
}

func TestSyncsAutomatically(t *testing.T) {
	for _, tc := range []struct {
		policy any
		want   bool
	}{
		{nil, false},
		{map[string]any{}, false},
		{map[string]any{"automated": map[string]any{}}, true},
		{map[string]any{"automated": map[string]any{"enabled": true}}, true},
		{map[string]any{"automated": map[string]any{"enabled": false}}, false},
	} {
		app := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"syncPolicy": tc.policy}}}
		if got := SyncsAutomatically(app); got != tc.want {
			t.Errorf("SyncsAutomatically with syncPolicy %v = %v; want %v", tc.policy, got, tc.want)
		}
		appSet := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": app.Object}}}
		if got := TemplateSyncsAutomatically(appSet); got != tc.want {
			t.Errorf("TemplateSyncsAutomatically with syncPolicy %v = %v; want %v", tc.policy, got, tc.want)
		}
	}
}
