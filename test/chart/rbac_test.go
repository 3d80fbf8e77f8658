package chart

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// scope says where a permission is needed: every namespace (a ClusterRole), the Argo CD
// namespace, or the release namespace.
type scope string

const (
	cluster         scope = "cluster"
	argocdScope     scope = "argocd"
	releaseScope    scope = "release"
	leaseName             = addonName + "-addon-manager"
	apiClientSigner       = "kubernetes.io/kube-apiserver-client"
)

// permission is one verb on one resource (and name) that the manager needs.
type permission struct {
	scope                        scope
	group, resource, verb, named string
	why                          string
}

func (p permission) String() string {
	s := fmt.Sprintf("%s %s.%s (%s)", p.verb, p.resource, p.group, p.scope)
	if p.named != "" {
		s += " named " + p.named
	}
	return s
}

func perms(s scope, group, resource, named, why string, verbs ...string) []permission {
	var out []permission
	for _, v := range verbs {
		out = append(out, permission{scope: s, group: group, resource: resource, verb: v, named: named, why: why})
	}
	return out
}

// needed lists what the manager does, read from pkg/hub and from addon-framework v1.3.0's
// addonmanager. It is the definition of "least privilege" for the chart: the chart must
// grant each (TestRBACAgainstAPIServer) and nothing else (TestRBACGrantsOnlyWhatIsNeeded).
// agentRole names the agent's hub Role and RoleBinding in each cluster namespace.
const agentRole = "open-cluster-management:" + addonName + ":agent"

// redisPasswordSecret is the chart's default hubArgoCDCache.passwordSecret.name.
const redisPasswordSecret = "argocd-redis"

var needed = slices.Concat(
	perms(cluster, "argoproj.io", "applications", "", "propagation: finalizers, .operation, refresh; appstatus: status", "get", "list", "watch", "patch"),
	perms(cluster, "argoproj.io", "applicationsets", "", "report controller", "get", "list", "watch"),
	perms(cluster, "work.open-cluster-management.io", "manifestworks", "", "propagation (apply, delete), framework agent deploy", "get", "list", "watch", "create", "patch", "delete"),
	perms(cluster, "cluster.open-cluster-management.io", "managedclusters", "", "propagation, cluster secrets, framework", "get", "list", "watch"),
	perms(cluster, "cluster.open-cluster-management.io", "placementdecisions", "", "tenant gate", "get", "list", "watch"),
	perms(cluster, "cluster.open-cluster-management.io", "placements", "", "tenant gate: the decisions' owners, by UID (metadata cache)", "list", "watch"),
	perms(cluster, "addon.open-cluster-management.io", "managedclusteraddons", "", "opt-in, framework", "list", "watch"),
	perms(cluster, "addon.open-cluster-management.io", "managedclusteraddons", addonName, "framework finalizers", "get", "update"),
	perms(cluster, "addon.open-cluster-management.io", "managedclusteraddons/status", addonName, "PropagationPaused, framework status", "patch"),
	perms(cluster, "addon.open-cluster-management.io", "managedclusteraddons/finalizers", addonName, "blockOwnerDeletion on objects owned by the addon", "update"),
	perms(cluster, "addon.open-cluster-management.io", "clustermanagementaddons", "", "pause switch", "list", "watch"),
	perms(cluster, "addon.open-cluster-management.io", "clustermanagementaddons", addonName, "framework lifecycle annotation", "get", "patch"),
	perms(cluster, "addon.open-cluster-management.io", "clustermanagementaddons/status", addonName, "framework cmaconfig", "patch"),
	perms(cluster, "addon.open-cluster-management.io", "addondeploymentconfigs", "", "framework addonconfig, agent manifests", "get", "list", "watch"),
	perms(cluster, "certificates.k8s.io", "certificatesigningrequests", "", "framework CSR approval", "get", "list", "watch"),
	perms(cluster, "certificates.k8s.io", "certificatesigningrequests/approval", "", "framework CSR approval", "update"),
	perms(cluster, "certificates.k8s.io", "signers", apiClientSigner, "framework CSR approval", "approve"),
	perms(cluster, "rbac.authorization.k8s.io", "roles", "", "the agent's hub Role (utils.ApplyRole)", "create"),
	perms(cluster, "rbac.authorization.k8s.io", "roles", agentRole, "the agent's hub Role (utils.ApplyRole; its cache, by name)", "get", "list", "watch", "update"),
	perms(cluster, "rbac.authorization.k8s.io", "rolebindings", "", "the agent's hub RoleBinding", "create"),
	perms(cluster, "rbac.authorization.k8s.io", "rolebindings", agentRole, "the agent's hub RoleBinding (and its cache, by name)", "get", "list", "watch", "update"),
	perms(cluster, "", "resourcequotas", "", "the agent's status slice quota (grantHubPermissions)", "create"),
	perms(cluster, "", "resourcequotas", addonName+"-status-slices", "the agent's status slice quota (and its cache, by name; sliceQuotaRepair re-creates it)", "get", "list", "watch", "update", "delete"),
	perms(cluster, "", "events", "", "Events of every controller", "create", "patch"),
	perms(cluster, "events.k8s.io", "events", "", "Events of every controller", "create", "patch"),
	perms(cluster, "apps.open-cluster-management.io", "multiclusterapplicationsetreports", "", "report controller", "get", "list", "watch", "create", "patch", "delete"),
	perms(cluster, "apiextensions.k8s.io", "customresourcedefinitions", "multiclusterapplicationsetreports.apps.open-cluster-management.io", "report controller: the served schema", "get"),
	perms(cluster, "argocd-pull.open-cluster-management.io", "applicationstatusslices", "", "the agent's hub Role grants them (HubRole), so the manager holds them; the hub reads the slices",
		"get", "list", "watch", "create", "update", "patch", "delete"),
	perms(argocdScope, "", "secrets", redisPasswordSecret, "resourcetree: the hub Argo CD's Redis password, by name (hubArgoCDCache)", "get"),
	perms(argocdScope, "", "secrets", "", "clustersecret: the cluster Secrets' caches, apply and delete; uninstall (manager.clusterSecrets)",
		"list", "watch", "create", "patch", "delete"),
	perms(argocdScope, "argoproj.io", "appprojects", "", "propagation ships the AppProject", "get", "list", "watch"),
	perms(releaseScope, "coordination.k8s.io", "leases", "", "leader election: the first Lease", "create"),
	perms(releaseScope, "coordination.k8s.io", "leases", leaseName, "leader election", "get", "update"),
	perms(releaseScope, "apps", "deployments/scale", managerName, "uninstall hook: stop the manager first", "get", "update"),
	perms(cluster, "proxy.argocd-pull.open-cluster-management.io", "agents/proxy", "", "the agent's hub Role grants it (HubRole): the resource proxy's tunnel", "get", "create"),
	perms(cluster, "apiregistration.k8s.io", "apiservices", "v1alpha1.proxy.argocd-pull.open-cluster-management.io", "resourceproxy: the APIService's caBundle", "get", "patch"),
	perms(argocdScope, "", "secrets", addonName+"-resource-proxy-token", "clustersecret: argocd-server's token for the resource proxy", "get"),
	perms(cluster, "authentication.k8s.io", "tokenreviews", "", "secure metrics: who scrapes", "create"),
	perms(cluster, "authorization.k8s.io", "subjectaccessreviews", "", "secure metrics: may they get /metrics", "create"),
)

// grantedBy expands rules into permissions of scope s; it fails on a wildcard.
func grantedBy(t *testing.T, s scope, rules []rbacv1.PolicyRule) []permission {
	t.Helper()
	var out []permission
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("%s rule grants non-resource URLs %v", s, r.NonResourceURLs)
		}
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" || slices.Contains([]string{"escalate", "bind", "impersonate"}, v) {
						t.Errorf("%s rule %+v grants %s on %s.%s: no wildcards nor escalation verbs", s, r, v, res, g)
					}
					for _, n := range names {
						out = append(out, permission{scope: s, group: g, resource: res, verb: v, named: n})
					}
				}
			}
		}
	}
	return out
}

// rendered returns the permissions that the chart's Roles and ClusterRoles grant the
// manager's ServiceAccount, by scope.
func renderedPermissions(t *testing.T, set ...string) []permission {
	t.Helper()
	objs := render(t, set...)
	bound := boundRoles(t, objs, "ServiceAccount", managerName, namespace)
	var granted []permission
	for key, obj := range find(objs, "ClusterRole") {
		if bound["ClusterRole/"+obj.GetName()] {
			granted = append(granted, grantedBy(t, cluster, convert[rbacv1.ClusterRole](t, obj).Rules)...)
		}
		_ = key
	}
	for key, obj := range find(objs, "Role") {
		role := convert[rbacv1.Role](t, obj)
		if !bound[role.Namespace+"/Role/"+role.Name] {
			continue
		}
		switch role.Namespace {
		case argocdNS:
			granted = append(granted, grantedBy(t, argocdScope, role.Rules)...)
		case namespace:
			granted = append(granted, grantedBy(t, releaseScope, role.Rules)...)
		default:
			t.Errorf("Role %s in an unexpected namespace", key)
		}
	}
	return granted
}

// boundRoles returns the roles that the chart's bindings grant to the subject, as
// "ClusterRole/<name>" and "<namespace>/Role/<name>".
func boundRoles(t *testing.T, objs []*unstructured.Unstructured, kind, name, subjectNamespace string) map[string]bool {
	t.Helper()
	bound := map[string]bool{}
	binds := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == kind && s.Name == name && s.Namespace == subjectNamespace
		})
	}
	for _, obj := range find(objs, "ClusterRoleBinding") {
		b := convert[rbacv1.ClusterRoleBinding](t, obj)
		if binds(b.Subjects) {
			bound["ClusterRole/"+b.RoleRef.Name] = true
		}
	}
	for _, obj := range find(objs, "RoleBinding") {
		b := convert[rbacv1.RoleBinding](t, obj)
		if binds(b.Subjects) {
			bound[b.Namespace+"/"+b.RoleRef.Kind+"/"+b.RoleRef.Name] = true
		}
	}
	return bound
}

// TestApplicationSetPrerequisites: the ApplicationSet controller may read the
// PlacementDecisions of each ApplicationSet namespace, and nothing else; each namespace
// gets the placement generator ConfigMap; and both can be turned off.
func TestApplicationSetPrerequisites(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        []string
		namespaces []string
	}{
		{"default: the Argo CD namespace", nil, []string{argocdNS}},
		{"two namespaces", []string{"applicationSet.placementGenerator.namespaces={team-a,team-b}"}, []string{"team-a", "team-b"}},
		{"off", []string{"applicationSet.placementGenerator.enabled=false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.set...)
			var configMaps []string
			for _, obj := range find(objs, "ConfigMap") {
				if obj.GetName() != "ocm-placement-generator" {
					continue
				}
				configMaps = append(configMaps, obj.GetNamespace())
				data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
				want := map[string]string{"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "placementdecisions",
					"statusListKey": "decisions", "matchKey": "clusterName"}
				if !reflect.DeepEqual(data, want) {
					t.Errorf("ConfigMap %s/%s data = %v, want %v", obj.GetNamespace(), obj.GetName(), data, want)
				}
			}
			slices.Sort(configMaps)
			if !slices.Equal(configMaps, tc.namespaces) {
				t.Errorf("placement generator ConfigMaps in %v, want %v", configMaps, tc.namespaces)
			}
			bound := boundRoles(t, objs, "ServiceAccount", "argocd-applicationset-controller", argocdNS)
			var granted []string
			for _, obj := range find(objs, "Role") {
				role := convert[rbacv1.Role](t, obj)
				if !bound[role.Namespace+"/Role/"+role.Name] {
					continue
				}
				for _, p := range grantedBy(t, scope(role.Namespace), role.Rules) {
					granted = append(granted, p.String())
				}
			}
			if len(bound) != len(tc.namespaces) {
				t.Errorf("the ApplicationSet controller is bound to %v, want one Role in each of %v", bound, tc.namespaces)
			}
			var want []string
			for _, ns := range tc.namespaces {
				for _, verb := range []string{"get", "list", "watch"} {
					want = append(want, permission{scope: scope(ns), group: "cluster.open-cluster-management.io", resource: "placementdecisions", verb: verb}.String())
				}
			}
			slices.Sort(granted)
			slices.Sort(want)
			if !slices.Equal(granted, want) {
				t.Errorf("the ApplicationSet controller may %v, want %v", granted, want)
			}
		})
	}
}

// TestRBACGrantsOnlyWhatIsNeeded: every permission the chart grants is one the manager
// needs, and none is granted by a wildcard. With TestRBACAgainstAPIServer, which checks
// that each needed one is granted, the chart's RBAC is exactly the manager's needs.
func TestRBACGrantsOnlyWhatIsNeeded(t *testing.T) {
	key := func(p permission) permission { p.why = ""; return p }
	var want []permission
	for _, p := range needed {
		want = append(want, key(p))
	}
	granted := renderedPermissions(t)
	for _, p := range granted {
		if !slices.Contains(want, p) {
			t.Errorf("the chart grants %s, which the manager does not need", p)
		}
	}
	for _, p := range want {
		if !slices.Contains(granted, p) {
			t.Errorf("the chart does not grant %s", p)
		}
	}
	// Secrets only in the Argo CD namespace.
	for _, p := range granted {
		if p.resource == "secrets" && p.scope != argocdScope {
			t.Errorf("the chart grants %s: secrets are for the Argo CD namespace only", p)
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	var ja, jb any
	for _, x := range []struct {
		in  any
		out *any
	}{{a, &ja}, {b, &jb}} {
		data, err := json.Marshal(x.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, x.out); err != nil {
			t.Fatal(err)
		}
	}
	return reflect.DeepEqual(ja, jb)
}

// TestSecretRightsFollowTheFeatures: the manager's rights on Secrets come with the
// features that need them, and go with them: get on the Redis password Secret by name
// with hubArgoCDCache, the cluster Secrets' verbs with manager.clusterSecrets (and get
// on the resource proxy's client token by name, with resourceProxy too), and with
// neither no right on any Secret.
func TestSecretRightsFollowTheFeatures(t *testing.T) {
	redis := perms(argocdScope, "", "secrets", redisPasswordSecret, "", "get")
	clusterSecrets := slices.Concat(perms(argocdScope, "", "secrets", "", "", "list", "watch", "create", "patch", "delete"),
		perms(argocdScope, "", "secrets", addonName+"-resource-proxy-token", "", "get"))
	for _, tc := range []struct {
		name string
		set  []string
		want []permission
	}{
		{"default", nil, slices.Concat(redis, clusterSecrets)},
		{"no cluster Secrets", []string{"manager.clusterSecrets=false"}, redis},
		{"no resource trees", []string{"hubArgoCDCache.enabled=false"}, clusterSecrets},
		{"another password Secret", []string{"manager.clusterSecrets=false", "hubArgoCDCache.passwordSecret.name=redis-auth"},
			perms(argocdScope, "", "secrets", "redis-auth", "", "get")},
		{"neither", []string{"manager.clusterSecrets=false", "hubArgoCDCache.enabled=false"}, nil},
		{"cluster Secrets without the resource proxy", []string{"hubArgoCDCache.enabled=false", "resourceProxy.enabled=false"},
			perms(argocdScope, "", "secrets", "", "", "list", "watch", "create", "patch", "delete")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range renderedPermissions(t, tc.set...) {
				if p.resource == "secrets" {
					got = append(got, p.String())
				}
			}
			var want []string
			for _, p := range tc.want {
				want = append(want, p.String())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("the manager may %v on Secrets, want %v", got, want)
			}
		})
	}
}
