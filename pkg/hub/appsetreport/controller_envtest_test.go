package appsetreport

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// The suite plays the ApplicationSet controller (it creates the hub Applications), the
// propagation controller (it creates the works, annotated as propagation renders them),
// the work agent (it writes their feedback) and the spoke agent (it writes its report on
// the ManagedClusterAddOn with the real encoder). envtest has no garbage collector: the
// report's ownerReference is asserted, not its collection.

const (
	appsNamespace = "apps"
	appSetName    = "guestbook"
)

var clusters = []string{"cluster1", "cluster2", "cluster3"}

// fixedTime is the LastTransitionTime of the agent's conditions; staleSince that of the
// Available condition.
var (
	fixedTime  = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	staleSince = metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
)

// syncErrorMessage returns an Argo CD SyncError message longer than the report's bound.
func syncErrorMessage(variant string) string {
	msg := "Failed sync attempt (" + variant + "): one or more objects failed to apply, reason: "
	for i := 0; len(msg) < 3*MaxConditionMessageBytes/2; i++ {
		msg += `services is forbidden: User "system:serviceaccount:argocd:argocd-application-controller" cannot create resource "services" in API group "" in the namespace "guestbook",`
	}
	return msg
}

// shared is the package's apiserver, started by the first envtest test.
var shared testenv.Shared

// applicationSet returns the ApplicationSet namespace/name, of a list generator, as the
// suites create it.
func applicationSet(namespace, name string) *unstructured.Unstructured {
	appSet := argoapp.NewApplicationSet()
	appSet.Object["spec"] = map[string]any{
		"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
		"template": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{
			"project": "default", "destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"},
		}},
	}
	appSet.SetNamespace(namespace)
	appSet.SetName(name)
	return appSet
}

// applicationOf returns the pulled hub Application name that the created appSet
// generates for cluster, in its namespace, owned by it.
func applicationOf(appSet *unstructured.Unstructured, name, cluster string) *unstructured.Unstructured {
	app := testenv.PulledApplication(appSet.GetNamespace(), name, cluster)
	app.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.KindApplicationSet, Name: appSet.GetName(), UID: appSet.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
	return app
}

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

func TestReportController(t *testing.T) {
	env := shared.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := env.Client
	newG := func(t *testing.T) *gomega.WithT {
		g := gomega.NewWithT(t)
		g.SetDefaultEventuallyTimeout(15 * time.Second)
		g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
		g.SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
		return g
	}
	g := newG(t)

	for _, ns := range append([]string{appsNamespace}, clusters...) {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(gomega.Succeed())
	}

	// The manager as pkg/hub.Run builds it (its scheme and cache), and one decoder of the
	// agents' reports; writes counts the controller's writes.
	opts := Options{AddonName: clusterreport.DefaultAddonName, WatchNamespaces: []string{appsNamespace}, Concurrency: 2,
		Settings: DefaultSettings()}
	decoder := observed.NewDecoder()
	writes := &testenv.WriteLog{}
	scope := hubcache.Scope{AddonName: opts.AddonName, ArgoCDNamespace: "argocd", WatchNamespaces: opts.WatchNamespaces, ReportFieldManager: FieldManager}
	testenv.StartManager(t, env, scope, writes, func(mgr ctrl.Manager, c client.Client) error {
		return Setup(mgr, c, decoder, opts)
	})

	// The ApplicationSet, and one pulled Application per cluster, owned by it.
	appSet := applicationSet(appsNamespace, appSetName)
	g.Expect(c.Create(ctx, appSet)).To(gomega.Succeed())

	hubApp := func(cluster string) string { return appSetName + "-" + cluster }
	apps := map[string]*unstructured.Unstructured{}
	works := map[string]*workv1.ManifestWork{}
	for _, cluster := range clusters {
		app := applicationOf(appSet, hubApp(cluster), cluster)
		g.Expect(c.Create(ctx, app)).To(gomega.Succeed())
		apps[cluster] = app
		work := testenv.PropagatedWork(app, cluster, opts.AddonName)
		g.Expect(c.Create(ctx, work)).To(gomega.Succeed())
		works[cluster] = work
	}

	// setFeedback plays the work agent. note goes to a work condition, so that writing
	// the same feedback again still changes the work.
	type feedback struct{ health, sync, phase string }
	hub := testenv.NewHub(t, env, appsNamespace)
	setFeedback := func(cluster string, f feedback, note string) {
		hub.UpdateWorkStatus(client.ObjectKeyFromObject(works[cluster]), func(cur *workv1.ManifestWork) {
			cur.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{testenv.ApplicationFeedback("argocd", hubApp(cluster), map[string]string{
				argoapp.FeedbackHealthStatus: f.health, argoapp.FeedbackSyncStatus: f.sync,
				argoapp.FeedbackSyncRevision: "sha1", argoapp.FeedbackOperationStatePhase: f.phase,
				argoapp.FeedbackOperationStateStartedAt: "2026-01-01T00:00:00Z",
			})}
			cur.Status.Conditions = []metav1.Condition{{
				Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
				Message: "applied " + note, LastTransitionTime: fixedTime,
			}}
		})
	}

	// agentApp is what the agent on cluster reports of its Application.
	agentApp := func(cluster string, sync, health string, resources []argoapp.ResourceStatus, conditions []argoapp.Condition) clusterreport.App {
		return clusterreport.App{
			Namespace: "argocd", Name: hubApp(cluster), HubNamespace: appsNamespace, HubName: hubApp(cluster),
			ApplicationSet: argoapp.ApplicationSetKey(appsNamespace, appSetName), ManifestWork: works[cluster].Name,
			Sync:      argoapp.SyncStatus{Status: sync, Revision: "sha1"},
			Health:    argoapp.HealthStatus{Status: health},
			Operation: argoapp.OperationState{Phase: "Running", StartedAt: "2026-01-01T00:00:00Z"},
			Resources: resources, Conditions: conditions, ObservedAt: fixedTime.Time,
		}
	}
	// setAgentReport plays the agent and the addon framework: the encoded report, extra
	// raw conditions, and the Available condition (note goes to its message, which the
	// controller does not read).
	setAgentReport := func(cluster string, reported []clusterreport.App, available metav1.ConditionStatus, note string, extra ...metav1.Condition) *addonv1beta1.ManagedClusterAddOn {
		enc, err := clusterreport.Encode(clusterreport.Report{Apps: reported})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		conds := append(enc.Conditions, extra...)
		for i := range conds {
			conds[i].LastTransitionTime = fixedTime
		}
		conds = append(conds, metav1.Condition{
			Type: addonv1beta1.ManagedClusterAddOnConditionAvailable, Status: available, Reason: "ManagedClusterAddOnLeaseUpdated",
			Message: "lease " + note, LastTransitionTime: staleSince,
		})
		return hub.UpdateAddonStatus(types.NamespacedName{Namespace: cluster, Name: opts.AddonName},
			func(cur *addonv1beta1.ManagedClusterAddOn) { cur.Status.Conditions = conds })
	}
	for _, cluster := range clusters {
		g.Expect(c.Create(ctx, &addonv1beta1.ManagedClusterAddOn{
			ObjectMeta: metav1.ObjectMeta{Name: opts.AddonName, Namespace: cluster},
		})).To(gomega.Succeed())
		setAgentReport(cluster, nil, metav1.ConditionTrue, "")
	}

	reportKey := types.NamespacedName{Namespace: appsNamespace, Name: appSetName}
	getReport := func(g gomega.Gomega) *appsv1alpha1.MulticlusterApplicationSetReport {
		r := &appsv1alpha1.MulticlusterApplicationSetReport{}
		g.Expect(c.Get(ctx, reportKey, r)).To(gomega.Succeed())
		return r
	}
	entry := func(g gomega.Gomega, r *appsv1alpha1.MulticlusterApplicationSetReport, cluster string) appsv1alpha1.ClusterCondition {
		for _, cc := range r.Statuses.ClusterConditions {
			if cc.Cluster == cluster {
				return cc
			}
		}
		g.Expect(cluster).To(gomega.BeEmpty(), "no entry for the cluster")
		return appsv1alpha1.ClusterCondition{}
	}
	appField := func(cluster string) string {
		return appsNamespace + "/" + hubApp(cluster) + "/" + cluster + "/" + works[cluster].Name
	}
	summary := func(clusters, synced, notSynced, healthy, notHealthy, inProgress, stale string) appsv1alpha1.ReportSummary {
		return appsv1alpha1.ReportSummary{Clusters: clusters, Synced: synced, NotSynced: notSynced, Healthy: healthy,
			NotHealthy: notHealthy, InProgress: inProgress, Stale: stale}
	}

	t.Run("created for the ApplicationSet, clusters that have not reported are Unknown", func(t *testing.T) {
		g := newG(t)
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Labels).To(gomega.HaveKeyWithValue(appsv1alpha1.LabelHostingApplicationSet, "apps.guestbook"))
			g.Expect(r.OwnerReferences).To(gomega.Equal([]metav1.OwnerReference{{
				APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: appSetName, UID: appSet.GetUID(), Controller: ptr.To(true),
			}}))
			g.Expect(r.Statuses.ClusterConditions).To(gomega.HaveLen(3))
			for i, cluster := range clusters {
				g.Expect(r.Statuses.ClusterConditions[i]).To(gomega.Equal(appsv1alpha1.ClusterCondition{
					Cluster: cluster, App: appField(cluster), SyncStatus: "Unknown", HealthStatus: "Unknown",
				}))
			}
			g.Expect(r.Statuses.Resources).To(gomega.BeEmpty())
			g.Expect(r.Statuses.Summary).To(gomega.Equal(summary("3", "0", "3", "0", "3", "0", "0")))
			g.Expect(r.Statuses.LastUpdateTime).NotTo(gomega.BeNil())
		}).Should(gomega.Succeed())
		g.Expect(appField("cluster1")).To(gomega.MatchRegexp(`^apps/guestbook-cluster1/cluster1/[a-z0-9.-]+$`))
	})

	firstError, secondError := syncErrorMessage("first"), syncErrorMessage("second")
	cluster1Resources := []argoapp.ResourceStatus{
		{Version: "v1", Kind: "Service", Namespace: "guestbook", Name: "guestbook-ui", Status: "OutOfSync", Health: argoapp.HealthStatus{Status: HealthMissing}},
		{Version: "v1", Kind: "ConfigMap", Namespace: "guestbook", Name: "guestbook-config", Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}},
	}
	cluster2Resources := []argoapp.ResourceStatus{
		{Version: "v1", Kind: "Service", Namespace: "guestbook", Name: "guestbook-ui", Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook", Name: "guestbook-ui", Status: "Synced", Health: argoapp.HealthStatus{Status: "Progressing"}},
	}
	cluster1Report := func(message string) []clusterreport.App {
		return []clusterreport.App{agentApp("cluster1", "OutOfSync", HealthMissing, cluster1Resources,
			[]argoapp.Condition{{Type: "SyncError", Message: message}, {Type: "SharedResourceWarning", Message: "not an error"}})}
	}
	cluster2Report := func(resources []argoapp.ResourceStatus) []clusterreport.App {
		return []clusterreport.App{agentApp("cluster2", "Synced", "Progressing", resources, nil)}
	}
	ref := func(apiVersion, kind, name string) appsv1alpha1.ResourceRef {
		return appsv1alpha1.ResourceRef{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: "guestbook"}
	}

	t.Run("feedback and agent reports: one SyncError, two Synced and Progressing", func(t *testing.T) {
		g := newG(t)
		setFeedback("cluster1", feedback{"Missing", "OutOfSync", "Failed"}, "")
		setFeedback("cluster2", feedback{"Progressing", "Synced", "Running"}, "")
		setFeedback("cluster3", feedback{"Progressing", "Synced", "Running"}, "")
		setAgentReport("cluster1", cluster1Report(firstError), metav1.ConditionTrue, "")
		setAgentReport("cluster2", cluster2Report(cluster2Resources), metav1.ConditionTrue, "")
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Statuses.Summary).To(gomega.Equal(summary("3", "2", "1", "0", "3", "2", "0")))
			g.Expect(entry(g, r, "cluster1")).To(gomega.Equal(appsv1alpha1.ClusterCondition{
				Cluster: "cluster1", App: appField("cluster1"), SyncStatus: "OutOfSync", HealthStatus: "Missing", SyncRevision: "sha1",
				OperationStatePhase: "Failed", OperationStateStartedAt: "2026-01-01T00:00:00Z",
				Conditions: []appsv1alpha1.Condition{{Type: "SyncError", Message: clusterreport.TruncateMessage(firstError, MaxConditionMessageBytes)}},
			}))
			for _, cluster := range []string{"cluster2", "cluster3"} {
				e := entry(g, r, cluster)
				var notes []appsv1alpha1.Condition
				e.Conditions, notes = nil, e.Conditions
				g.Expect(e).To(gomega.Equal(appsv1alpha1.ClusterCondition{
					Cluster: cluster, App: appField(cluster), SyncStatus: "Synced", HealthStatus: "Progressing", SyncRevision: "sha1",
					OperationStatePhase: "Running", OperationStateStartedAt: "2026-01-01T00:00:00Z",
				}))
				if cluster == "cluster2" {
					g.Expect(notes).To(gomega.BeEmpty())
					continue
				}
				// cluster3's work is applied, its agent reports, but not this app.
				g.Expect(notes).To(gomega.HaveLen(1))
				g.Expect(notes[0].Type).To(gomega.Equal(observed.ConditionNotReported))
				g.Expect(notes[0].Message).To(gomega.HavePrefix("The agent of cluster cluster3 reports applications, but not this one (argocd/guestbook-cluster3, delivered by ManifestWork " + works["cluster3"].Name + ")"))
			}
			// The union; cluster1's Service failed to deploy, cluster2's did not.
			g.Expect(r.Statuses.Resources).To(gomega.Equal([]appsv1alpha1.ResourceRef{
				ref("apps/v1", "Deployment", "guestbook-ui"), ref("v1", "ConfigMap", "guestbook-config"), ref("v1", "Service", "guestbook-ui"),
			}))
		}).Should(gomega.Succeed())
		msg := entry(g, getReport(g), "cluster1").Conditions[0].Message
		g.Expect(len(msg)).To(gomega.BeNumerically("<=", MaxConditionMessageBytes))
		g.Expect(msg).To(gomega.HaveSuffix(clusterreport.Ellipsis))
		g.Expect(firstError).To(gomega.HavePrefix(strings.TrimSuffix(msg, clusterreport.Ellipsis)))
	})

	t.Run("a feedback change on one work changes its entry only, within seconds", func(t *testing.T) {
		g := newG(t)
		before := getReport(g)
		// Another cluster's app is Progressing: the change may wait as long as the
		// settle wait, and not much longer.
		setFeedback("cluster3", feedback{"Healthy", "Synced", "Succeeded"}, "")
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(entry(g, r, "cluster3").HealthStatus).To(gomega.Equal("Healthy"))
			g.Expect(entry(g, r, "cluster3").OperationStatePhase).To(gomega.Equal("Succeeded"))
			g.Expect(r.Statuses.Summary).To(gomega.Equal(summary("3", "2", "1", "1", "2", "1", "0")))
			for _, cluster := range []string{"cluster1", "cluster2"} {
				g.Expect(entry(g, r, cluster)).To(gomega.Equal(entry(g, before, cluster)))
			}
			g.Expect(r.Statuses.Resources).To(gomega.Equal(before.Statuses.Resources))
		}, opts.SettleWait+2*time.Second).Should(gomega.Succeed())
	})

	t.Run("an agent report change: resources and a new cut SyncError", func(t *testing.T) {
		g := newG(t)
		withExtra := append(append([]argoapp.ResourceStatus{}, cluster2Resources...), argoapp.ResourceStatus{
			Version: "v1", Kind: "ConfigMap", Namespace: "guestbook", Name: "extra", Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"},
		})
		setAgentReport("cluster2", cluster2Report(withExtra), metav1.ConditionTrue, "")
		setAgentReport("cluster1", cluster1Report(secondError), metav1.ConditionTrue, "")
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Statuses.Resources).To(gomega.Equal([]appsv1alpha1.ResourceRef{
				ref("apps/v1", "Deployment", "guestbook-ui"), ref("v1", "ConfigMap", "extra"),
				ref("v1", "ConfigMap", "guestbook-config"), ref("v1", "Service", "guestbook-ui"),
			}))
			g.Expect(entry(g, r, "cluster1").Conditions).To(gomega.Equal([]appsv1alpha1.Condition{
				{Type: "SyncError", Message: clusterreport.TruncateMessage(secondError, MaxConditionMessageBytes)},
			}))
		}, 2*time.Second).Should(gomega.Succeed())
	})

	t.Run("a stale cluster is marked, not dropped", func(t *testing.T) {
		g := newG(t)
		for _, status := range []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionUnknown} {
			setAgentReport("cluster2", cluster2Report(cluster2Resources), status, "")
			g.Eventually(func(g gomega.Gomega) {
				r := getReport(g)
				g.Expect(r.Statuses.Summary).To(gomega.Equal(summary("3", "2", "1", "1", "2", "1", "1")))
				e := entry(g, r, "cluster2")
				g.Expect(e.SyncStatus).To(gomega.Equal("Synced"), "the last reported status is kept")
				g.Expect(e.HealthStatus).To(gomega.Equal("Progressing"))
				g.Expect(e.Conditions).To(gomega.HaveLen(1))
				g.Expect(e.Conditions[0].Type).To(gomega.Equal(observed.ConditionStale))
				g.Expect(e.Conditions[0].Message).To(gomega.ContainSubstring("Available=" + string(status)))
				g.Expect(e.Conditions[0].Message).To(gomega.ContainSubstring("since 2026-02-01T00:00:00Z"))
				g.Expect(entry(g, r, "cluster1").Conditions).To(gomega.HaveLen(1), "other clusters are not stale")
			}).Should(gomega.Succeed())
		}
		setAgentReport("cluster2", cluster2Report(cluster2Resources), metav1.ConditionTrue, "")
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Statuses.Summary.Stale).To(gomega.Equal("0"))
			g.Expect(entry(g, r, "cluster2").Conditions).To(gomega.BeEmpty())
		}).Should(gomega.Succeed())
	})

	// A valid report for cluster3, next to a garbage app condition and one of a version
	// this hub does not read.
	cluster3Report := []clusterreport.App{agentApp("cluster3", "Synced", "Healthy", []argoapp.ResourceStatus{
		{Version: "v1", Kind: "Secret", Namespace: "guestbook", Name: "only-on-cluster3", Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}},
	}, nil)}
	future, err := clusterreport.Encode(clusterreport.Report{Apps: []clusterreport.App{{Namespace: "argocd", Name: "from-the-future", ObservedAt: fixedTime.Time}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var invalid []metav1.Condition
	for _, cond := range future.Conditions {
		if clusterreport.IsAppCondition(cond.Type) {
			g.Expect(cond.Message).To(gomega.ContainSubstring(`"v":1`))
			cond.Message = strings.Replace(cond.Message, `"v":1`, `"v":99`, 1)
			invalid = append(invalid, cond)
		}
	}
	g.Expect(invalid).To(gomega.HaveLen(1))
	invalid = append(invalid, metav1.Condition{
		Type: clusterreport.AppConditionPrefix + "argocd.garbage", Status: metav1.ConditionTrue, Reason: "Garbage", Message: "{not json",
	})

	t.Run("a malformed agent report: a Warning Event, and the rest rendered", func(t *testing.T) {
		g := newG(t)
		addon := setAgentReport("cluster3", cluster3Report, metav1.ConditionTrue, "", invalid...)
		// The status mirror shares the decoder and may decode a new version before the
		// report controller's watch delivers it; here the test does, about half the time.
		// The Event is recorded all the same (observed.TestReportsClaimError pins this
		// deterministically).
		_, decodeErr, _ := decoder.Get(addon)
		g.Expect(decodeErr).To(gomega.HaveOccurred())
		g.Eventually(func(g gomega.Gomega) {
			events := &eventsv1.EventList{}
			g.Expect(c.List(ctx, events, client.InNamespace("cluster3"))).To(gomega.Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Reason == ReasonInvalidAgentReport && e.Type == corev1.EventTypeWarning &&
					e.Regarding.Kind == "ManagedClusterAddOn" && e.Regarding.Name == opts.AddonName {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(gomega.ContainElement(gomega.And(
				gomega.ContainSubstring("2 entries"), gomega.ContainSubstring("argocd.garbage"), gomega.ContainSubstring("version 99"))))
		}).Should(gomega.Succeed())
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Statuses.Resources).To(gomega.ContainElement(ref("v1", "Secret", "only-on-cluster3")))
			g.Expect(r.Statuses.ClusterConditions).To(gomega.HaveLen(3))
			g.Expect(entry(g, r, "cluster3").HealthStatus).To(gomega.Equal("Healthy"))
			g.Expect(entry(g, r, "cluster1").Conditions).To(gomega.HaveLen(1))
			g.Expect(r.Statuses.Summary).To(gomega.Equal(summary("3", "2", "1", "1", "2", "1", "0")))
		}).Should(gomega.Succeed())
	})

	t.Run("an app delivered to a namespace its agent does not watch, then watched", func(t *testing.T) {
		g := newG(t)
		g.Expect(entry(g, getReport(g), "cluster3").Conditions).To(gomega.BeEmpty(), "reported again since the previous step")
		// cluster2's agent watches openshift-gitops only; the app went to argocd.
		enc, err := clusterreport.Encode(clusterreport.Report{Scope: &clusterreport.Scope{WatchNamespaces: []string{"openshift-gitops"}}})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		scope := enc.Conditions[slices.IndexFunc(enc.Conditions, func(c metav1.Condition) bool { return c.Type == clusterreport.ConditionReportScope })]
		setAgentReport("cluster2", nil, metav1.ConditionTrue, "", scope)
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			e := entry(g, r, "cluster2")
			g.Expect(e.Conditions).To(gomega.HaveLen(1))
			g.Expect(e.Conditions[0].Type).To(gomega.Equal(observed.ConditionNotReported))
			g.Expect(e.Conditions[0].Message).To(gomega.HavePrefix(
				"The agent of cluster cluster2 watches the namespaces [openshift-gitops]; this application was delivered to namespace argocd"))
			g.Expect(e.SyncStatus).To(gomega.Equal("Synced"), "the feedback stays")
			// cluster2's Deployment is gone from the union.
			g.Expect(r.Statuses.Resources).NotTo(gomega.ContainElement(ref("apps/v1", "Deployment", "guestbook-ui")))
		}).Should(gomega.Succeed())
		// Back to the report of the previous steps: the entry and its resources come back.
		setAgentReport("cluster2", cluster2Report(cluster2Resources), metav1.ConditionTrue, "")
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(entry(g, r, "cluster2").Conditions).To(gomega.BeEmpty())
			g.Expect(r.Statuses.Resources).To(gomega.ContainElement(ref("apps/v1", "Deployment", "guestbook-ui")))
		}).Should(gomega.Succeed())
	})

	t.Run("zero writes while nothing changes", func(t *testing.T) {
		g := newG(t)
		// The previous step's final state is rendered; the reconciles it triggered are done
		// once the report stops changing.
		var rv string
		g.Eventually(func(g gomega.Gomega) {
			rv = getReport(g).ResourceVersion
			n := int64(writes.Succeeded())
			time.Sleep(300 * time.Millisecond)
			g.Expect(int64(writes.Succeeded())).To(gomega.Equal(n))
			g.Expect(getReport(g).ResourceVersion).To(gomega.Equal(rv))
		}).Should(gomega.Succeed())
		before := int64(writes.Succeeded())

		// The same feedback and agent reports again, each in a new version of its object.
		setFeedback("cluster1", feedback{"Missing", "OutOfSync", "Failed"}, "again")
		setFeedback("cluster2", feedback{"Progressing", "Synced", "Running"}, "again")
		setFeedback("cluster3", feedback{"Healthy", "Synced", "Succeeded"}, "again")
		setAgentReport("cluster1", cluster1Report(secondError), metav1.ConditionTrue, "again")
		setAgentReport("cluster2", cluster2Report(cluster2Resources), metav1.ConditionTrue, "again")
		setAgentReport("cluster3", cluster3Report, metav1.ConditionTrue, "again", invalid...)
		// Unrelated label changes: the Applications' pass the watch and are reconciled.
		touch := func(obj client.Object) {
			g.Eventually(func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return err
				}
				labels := obj.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				labels["touched"] = "yes"
				obj.SetLabels(labels)
				return c.Update(ctx, obj)
			}).Should(gomega.Succeed())
		}
		for _, cluster := range clusters {
			touch(apps[cluster].DeepCopy())
			touch(works[cluster].DeepCopy())
		}
		touch(appSet.DeepCopy())
		g.Consistently(func(g gomega.Gomega) {
			g.Expect(int64(writes.Succeeded())).To(gomega.Equal(before))
			g.Expect(getReport(g).ResourceVersion).To(gomega.Equal(rv))
		}, 2*time.Second, 100*time.Millisecond).Should(gomega.Succeed())
	})

	t.Run("another writer's change to the statuses is undone, in one write", func(t *testing.T) {
		g := newG(t)
		want := getReport(g)
		g.Expect(want.Annotations).To(gomega.HaveKeyWithValue(AnnotationStatusesDigest, gomega.HavePrefix("sha256:")),
			"the controller writes the digest it compares with")
		wantEntry := entry(g, want, "cluster2")
		// Another field manager edits cluster2's entry, as kubectl edit would.
		edited := want.DeepCopy()
		for i := range edited.Statuses.ClusterConditions {
			if edited.Statuses.ClusterConditions[i].Cluster == "cluster2" {
				edited.Statuses.ClusterConditions[i].SyncStatus = "Edited"
			}
		}
		before := int64(writes.Succeeded())
		g.Expect(c.Patch(ctx, edited, client.MergeFrom(want), client.FieldOwner("kubectl-edit"))).To(gomega.Succeed())
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(entry(g, getReport(g), "cluster2")).To(gomega.Equal(wantEntry))
		}).Should(gomega.Succeed())
		// Undone in one write, and no write after it: the edit's field manager keeps no
		// field of the statuses newer than the controller's write.
		written := func() int64 { return int64(writes.Succeeded()) - before }
		g.Eventually(written).Should(gomega.Equal(int64(1)))
		g.Consistently(written, 3*opts.WriteInterval, 100*time.Millisecond).Should(gomega.Equal(int64(1)))
	})

	t.Run("a burst of changes is written at most once per interval", func(t *testing.T) {
		g := newG(t)
		before := int64(writes.Succeeded())
		start := time.Now()
		// Four times the burst of changes of one cluster's feedback, faster than the
		// write interval, ending where they started.
		for i := range 4 * writeBurst {
			health := []string{"Healthy", "Degraded"}[i%2]
			setFeedback("cluster1", feedback{health, "Synced", "Running"}, fmt.Sprintf("burst %d", i))
		}
		setFeedback("cluster1", feedback{"Missing", "OutOfSync", "Failed"}, "after the burst")
		g.Eventually(func(g gomega.Gomega) {
			e := entry(g, getReport(g), "cluster1")
			g.Expect(e.HealthStatus).To(gomega.Equal("Missing"))
			g.Expect(e.SyncStatus).To(gomega.Equal("OutOfSync"))
		}).Should(gomega.Succeed())
		elapsed := time.Since(start)
		// The burst's writes in a row, one per opts.WriteInterval started (the
		// Consistently below included), and one for the last change.
		maxWrites := int64(writeBurst) + int64((elapsed+1500*time.Millisecond)/opts.WriteInterval) + 1
		g.Consistently(func() int64 { return int64(writes.Succeeded()) - before }, 1500*time.Millisecond, 100*time.Millisecond).
			Should(gomega.BeNumerically("<=", maxWrites), "writes for a burst of %d changes in %s", 4*writeBurst+1, elapsed)
	})

	t.Run("on a CRD that declares only the documented fields (ACM's), the report still applies, exact", func(t *testing.T) {
		g := newG(t)
		serveReportSchema(ctx, g, env, appsNamespace, documentedReportSchema(), false)
		// The apiserver serves the new schema once it prunes what it does not declare.
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(getReport(g).Statuses.LastUpdateTime).To(gomega.BeNil())
		}).Should(gomega.Succeed())

		setFeedback("cluster2", feedback{"Healthy", "Synced", "Succeeded"}, "documented")
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(entry(g, r, "cluster2").HealthStatus).To(gomega.Equal("Healthy"))
			g.Expect(r.Statuses.Summary.Healthy).To(gomega.Equal("2"))
			g.Expect(r.Statuses.Summary.Stale).To(gomega.BeEmpty())
			g.Expect(r.Statuses.LastUpdateTime).To(gomega.BeNil())
		}).Should(gomega.Succeed())
		// Settled: the fitted report is up to date, not rewritten for fields it cannot hold.
		g.Eventually(func(g gomega.Gomega) {
			n := int64(writes.Succeeded())
			time.Sleep(500 * time.Millisecond)
			g.Expect(int64(writes.Succeeded())).To(gomega.Equal(n))
		}).Should(gomega.Succeed())
		before := int64(writes.Succeeded())
		g.Consistently(func() int64 { return int64(writes.Succeeded()) }, 2*time.Second, 100*time.Millisecond).Should(gomega.Equal(before))
	})

	t.Run("a rollout is written when it settles, or once per settle wait; an error and a settled rollout at once", func(t *testing.T) {
		g := newG(t)
		wait := opts.SettleWait
		g.Expect(wait).To(gomega.BeNumerically(">=", 2*time.Second), "the default settle wait")
		// Every cluster settled, the agents reporting each app without conditions.
		settledState := feedback{"Healthy", "Synced", "Succeeded"}
		for _, cluster := range clusters {
			setAgentReport(cluster, []clusterreport.App{agentApp(cluster, "Synced", "Healthy", nil, nil)}, metav1.ConditionTrue, "rollout")
			setFeedback(cluster, settledState, "rollout")
		}
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(getReport(g).Statuses.Summary.InProgress).To(gomega.Equal("0"))
			n := writes.Succeeded()
			time.Sleep(500 * time.Millisecond)
			g.Expect(writes.Succeeded()).To(gomega.Equal(n))
		}).Should(gomega.Succeed())

		// Two clusters roll out: each step a state their clusters leave on their own.
		before := int64(writes.Succeeded())
		start := time.Now()
		steps := []feedback{{"Missing", "OutOfSync", "Running"}, {"Progressing", "OutOfSync", "Running"}, {"Progressing", "Synced", "Succeeded"}}
		for _, step := range steps {
			for _, cluster := range clusters[:2] {
				setFeedback(cluster, step, "rollout")
			}
			time.Sleep(200 * time.Millisecond)
		}
		stepped := time.Since(start)
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			for _, cluster := range clusters[:2] {
				e := entry(g, r, cluster)
				g.Expect(e.HealthStatus + "/" + e.SyncStatus).To(gomega.Equal("Progressing/Synced"))
			}
		}).Should(gomega.Succeed())
		shown := time.Since(start)
		held := int64(writes.Succeeded()) - before
		t.Logf("%d steps on 2 clusters in %v: %d report writes, the last step in the report after %v", len(steps),
			stepped.Round(time.Millisecond), held, shown.Round(time.Millisecond))
		g.Expect(held).To(gomega.BeNumerically("<=", 1+int64(stepped/wait)), "report writes while the rollout passed")
		g.Expect(shown).To(gomega.BeNumerically(">=", wait-time.Second), "the passing states were not held back")

		// An error goes at once, though cluster2 still passes; so does the rollout's end,
		// when no app passes any more.
		setFeedback("cluster2", feedback{"Progressing", "OutOfSync", "Running"}, "rollout again")
		set := time.Now()
		setAgentReport("cluster1", []clusterreport.App{agentApp("cluster1", "Synced", "Progressing", nil,
			[]argoapp.Condition{{Type: "SyncError", Message: "deployments.apps is forbidden"}})}, metav1.ConditionTrue, "rollout")
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(entry(g, getReport(g), "cluster1").Conditions).To(gomega.HaveLen(1))
		}).Should(gomega.Succeed())
		g.Expect(time.Since(set)).To(gomega.BeNumerically("<", wait-time.Second), "the error waited for the rollout")
		setFeedback("cluster2", settledState, "rollout settled")
		setFeedback("cluster1", settledState, "rollout settled")
		set = time.Now()
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(getReport(g).Statuses.Summary.InProgress).To(gomega.Equal("0"))
		}).Should(gomega.Succeed())
		g.Expect(time.Since(set)).To(gomega.BeNumerically("<", wait-time.Second), "the rollout's end waited")
	})

	t.Run("left to the pull controller that serves an app of the ApplicationSet (ACM's)", func(t *testing.T) {
		g := newG(t)
		setServedByAnother := func(served bool) {
			g.Eventually(func() error {
				app := apps["cluster1"].DeepCopy()
				if err := c.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
					return err
				}
				var err error
				if served {
					_, err = argoapp.SetCondition(app, argoapp.ConditionOCMPropagationError,
						argoapp.ReasonServedByAnotherController+": its ManifestWork cluster1/w was made by another controller", time.Now())
				} else {
					_, err = argoapp.RemoveCondition(app, argoapp.ConditionOCMPropagationError)
				}
				if err != nil {
					return err
				}
				return c.Update(ctx, app)
			}).Should(gomega.Succeed())
		}
		ours := getReport(g).Statuses.Summary.Clusters
		setServedByAnother(true)
		// The other controller writes the report of the same name; this controller
		// neither rewrites nor deletes it.
		g.Eventually(func() error {
			r := getReport(g)
			r.Statuses.Summary.Clusters = "99"
			return c.Update(ctx, r, client.FieldOwner("other-pull-controller"))
		}).Should(gomega.Succeed())
		g.Consistently(func(g gomega.Gomega) {
			g.Expect(getReport(g).Statuses.Summary.Clusters).To(gomega.Equal("99"))
		}, 3*opts.WriteInterval, 200*time.Millisecond).Should(gomega.Succeed())
		// Served by this addon again: its report again.
		setServedByAnother(false)
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(getReport(g).Statuses.Summary.Clusters).To(gomega.Equal(ours))
		}).Should(gomega.Succeed())
	})

	t.Run("deleted when the ApplicationSet has no pulled apps anymore", func(t *testing.T) {
		g := newG(t)
		// One app leaves the pull model: its entry goes.
		g.Eventually(func() error {
			app := apps["cluster3"].DeepCopy()
			if err := c.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
				return err
			}
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "false"})
			return c.Update(ctx, app)
		}).Should(gomega.Succeed())
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Statuses.ClusterConditions).To(gomega.HaveLen(2))
			g.Expect(r.Statuses.Summary.Clusters).To(gomega.Equal("2"))
			g.Expect(r.Statuses.Resources).NotTo(gomega.ContainElement(ref("v1", "Secret", "only-on-cluster3")))
		}).Should(gomega.Succeed())
		// The others are deleted: the report goes, the ApplicationSet stays.
		for _, cluster := range []string{"cluster1", "cluster2"} {
			g.Expect(c.Delete(ctx, apps[cluster])).To(gomega.Succeed())
		}
		g.Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, reportKey, &appsv1alpha1.MulticlusterApplicationSetReport{}))
		}).Should(gomega.BeTrue())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(appSet), appSet.DeepCopy())).To(gomega.Succeed())
		// It stays gone.
		g.Consistently(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, reportKey, &appsv1alpha1.MulticlusterApplicationSetReport{}))
		}, 500*time.Millisecond, 100*time.Millisecond).Should(gomega.BeTrue())
	})
}

// documentedReportSchema is the schema of a MulticlusterApplicationSetReport that
// declares only the fields of the pull-model reference, as Red Hat ACM's CRD does.
func documentedReportSchema() *apiextensionsv1.JSONSchemaProps {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	object := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	list := func(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
	}
	schema := object(map[string]apiextensionsv1.JSONSchemaProps{
		"apiVersion": str, "kind": str, "metadata": {Type: "object"},
		"statuses": object(map[string]apiextensionsv1.JSONSchemaProps{
			"resources": list(object(map[string]apiextensionsv1.JSONSchemaProps{"apiVersion": str, "kind": str, "name": str, "namespace": str})),
			"clusterConditions": list(object(map[string]apiextensionsv1.JSONSchemaProps{
				"cluster": str, "app": str, "syncStatus": str, "healthStatus": str, "syncRevision": str,
				"operationStatePhase": str, "operationStateStartedAt": str,
				"conditions": list(object(map[string]apiextensionsv1.JSONSchemaProps{"type": str, "message": str})),
			})),
			"summary": object(map[string]apiextensionsv1.JSONSchemaProps{
				"clusters": str, "synced": str, "notSynced": str, "healthy": str, "notHealthy": str, "inProgress": str,
			}),
		}),
	})
	return &schema
}
