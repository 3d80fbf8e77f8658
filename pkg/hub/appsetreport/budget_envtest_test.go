package appsetreport

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestReportOfTwoThousandClustersStaysWithinItsBudget runs the real controller on a
// real apiserver for an ApplicationSet of 2,000 clusters whose apps all fail with long
// errors. At full detail the report is past etcd's limit, and the apiserver refuses it
// (checked); the controller's apply succeeds, under the budget of 1 MiB, with exact
// counts and the cut stated, and one Warning Event on the ApplicationSet. When the
// errors clear, the report grows back to full detail, with one Normal Event. On a CRD
// that declares only ACM's fields, the cut report applies too, summary.truncated pruned
// and the counts exact.
func TestReportOfTwoThousandClustersStaysWithinItsBudget(t *testing.T) {
	env := shared.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := env.Client
	g := gomega.NewWithT(t)
	// Minutes, not seconds: 2,000 clusters' objects on a shared 2-core machine.
	g.SetDefaultEventuallyTimeout(5 * time.Minute)
	g.SetDefaultEventuallyPollingInterval(500 * time.Millisecond)

	const (
		n          = 2000
		namespace  = "fleet-apps"
		appSetName = "fleet"
		budget     = defaultBudgetBytes
	)
	opts := Options{AddonName: clusterreport.DefaultAddonName, WatchNamespaces: []string{namespace}, Concurrency: 2,
		Settings: Settings{WriteInterval: time.Second, BudgetBytes: budget}}
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(gomega.Succeed())
	// The other test of the package may have left ACM's schema served.
	ourSchema := reportCRDSchema(t)
	serveReportSchema(ctx, g, env, namespace, ourSchema, true)
	t.Cleanup(func() { serveReportSchema(context.Background(), gomega.NewWithT(t), env, namespace, ourSchema, true) })
	appSet := applicationSet(namespace, appSetName)
	g.Expect(c.Create(ctx, appSet)).To(gomega.Succeed())

	// The fleet: per cluster, its namespace, the hub Application of the ApplicationSet,
	// its ManifestWork as propagation renders it, and the agent's ManagedClusterAddOn.
	cluster := func(i int) string { return fmt.Sprintf("budget-%04d", i) }
	hubApp := func(i int) string { return appSetName + "-" + cluster(i) }
	workNames := make([]string, n)
	forEachCluster(t, n, func(i int) error {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster(i)}}); err != nil {
			return err
		}
		app := applicationOf(appSet, hubApp(i), cluster(i))
		if err := c.Create(ctx, app); err != nil {
			return err
		}
		workNames[i] = argoapp.ManifestWorkName(app.GetName(), app.GetUID())
		work := testenv.PropagatedWork(app, cluster(i), opts.AddonName)
		if err := c.Create(ctx, work); err != nil {
			return err
		}
		return c.Create(ctx, &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: opts.AddonName, Namespace: cluster(i)}})
	})

	// agentApp is what the agent of cluster i reports: failing with two errors of 4 KiB
	// (the agent keeps 1 KiB of each, the report 512 bytes), or Synced and Healthy. Each
	// app deploys 20 resources that every cluster has and one of its own.
	agentApp := func(i int, failing bool) clusterreport.App {
		a := clusterreport.App{
			Namespace: "argocd", Name: hubApp(i), HubNamespace: namespace, HubName: hubApp(i),
			ApplicationSet: argoapp.ApplicationSetKey(namespace, appSetName), ManifestWork: workNames[i],
			Sync:       argoapp.SyncStatus{Status: "Synced", Revision: "8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d"},
			Health:     argoapp.HealthStatus{Status: "Healthy"},
			Operation:  argoapp.OperationState{Phase: "Succeeded", StartedAt: "2026-01-01T00:00:00Z"},
			ObservedAt: fixedTime.Time,
		}
		for j := range 20 {
			a.Resources = append(a.Resources, argoapp.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment",
				Namespace: "guestbook", Name: fmt.Sprintf("web-%d", j), Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}})
		}
		a.Resources = append(a.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "guestbook",
			Name: "settings-" + cluster(i), Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}})
		if failing {
			a.Sync.Status, a.Health.Status, a.Operation.Phase = "OutOfSync", "Degraded", "Failed"
			a.Conditions = []argoapp.Condition{
				{Type: "SyncError", Message: longError("sync", cluster(i), 4096)},
				{Type: "ComparisonError", Message: longError("comparison", cluster(i), 4096)},
			}
		}
		return a
	}
	// setAgentReports plays each cluster's agent and the addon framework.
	setAgentReports := func(failing bool) {
		forEachCluster(t, n, func(i int) error {
			enc, err := clusterreport.Encode(clusterreport.Report{Apps: []clusterreport.App{agentApp(i, failing)}})
			if err != nil {
				return err
			}
			conds := append(enc.Conditions, metav1.Condition{
				Type: addonv1beta1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionTrue, Reason: "ManagedClusterAddOnLeaseUpdated",
			})
			for j := range conds {
				conds[j].LastTransitionTime = fixedTime
			}
			// One merge patch of the whole list: no read first, 2,000 times.
			patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
			if err != nil {
				return err
			}
			addon := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster(i), Name: opts.AddonName}}
			return c.Status().Patch(ctx, addon, client.RawPatch(types.MergePatchType, patch))
		})
	}
	setAgentReports(true)

	// The premise: at full detail, this apiserver refuses the report.
	var fullApps []ClusterApp
	for i := range n {
		a := agentApp(i, true)
		fullApps = append(fullApps, ClusterApp{Cluster: cluster(i), HubApp: hubApp(i), ManifestWork: workNames[i],
			State: observed.Merge(observed.FeedbackOf(nil), &a)})
	}
	full := RenderStatuses(namespace, fullApps)
	uncut := &appsv1alpha1.MulticlusterApplicationSetReport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "uncut"}, Statuses: full}
	uncutBytes := jsonSize(t, uncut)
	err := c.Create(ctx, uncut)
	g.Expect(err).To(gomega.HaveOccurred(), "a report of %d bytes was stored", uncutBytes)
	t.Logf("at full detail: %d bytes, refused: %v", uncutBytes, err)

	decoder := observed.NewDecoder()
	scope := hubcache.Scope{AddonName: opts.AddonName, ArgoCDNamespace: "argocd", WatchNamespaces: opts.WatchNamespaces, ReportFieldManager: FieldManager}
	testenv.StartManager(t, env, scope, &testenv.WriteLog{}, func(mgr ctrl.Manager, c client.Client) error {
		return Setup(mgr, c, decoder, opts)
	})

	reportKey := types.NamespacedName{Namespace: namespace, Name: appSetName}
	getReport := func(g gomega.Gomega) *appsv1alpha1.MulticlusterApplicationSetReport {
		r := &appsv1alpha1.MulticlusterApplicationSetReport{}
		g.Expect(c.Get(ctx, reportKey, r)).To(gomega.Succeed())
		return r
	}
	// events returns the occurrences of the Events of reason on the ApplicationSet.
	events := func(g gomega.Gomega, reason string) (occurrences int, notes []string) {
		list := &eventsv1.EventList{}
		g.Expect(c.List(ctx, list, client.InNamespace(namespace))).To(gomega.Succeed())
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == argoapp.KindApplicationSet && e.Regarding.Name == appSetName {
				occurrences++
				if e.Series != nil {
					occurrences += int(e.Series.Count) - 1
				}
				notes = append(notes, e.Type+": "+e.Note)
			}
		}
		return occurrences, notes
	}
	failingSummary := appsv1alpha1.ReportSummary{Clusters: "2000", Synced: "0", NotSynced: "2000", Healthy: "0", NotHealthy: "2000", InProgress: "0", Stale: "0"}

	t.Run("every cluster failing: applied within the budget, exact, the cut stated", func(t *testing.T) {
		g := gomega.NewWithT(t)
		var r *appsv1alpha1.MulticlusterApplicationSetReport
		g.Eventually(func(g gomega.Gomega) {
			r = getReport(g)
			g.Expect(withoutTruncation(r.Statuses.Summary)).To(gomega.Equal(failingSummary))
			g.Expect(r.Statuses.ClusterConditions).To(gomega.HaveLen(n))
			for _, e := range r.Statuses.ClusterConditions {
				g.Expect(e.Conditions).NotTo(gomega.BeEmpty(), "entry %s", e.Cluster)
			}
		}, 5*time.Minute, time.Second).Should(gomega.Succeed())
		stored := jsonSize(t, r)
		t.Logf("applied: %d bytes stored (budget %d): %s", stored, budget, r.Statuses.Summary.Truncated.Message)
		g.Expect(stored).To(gomega.BeNumerically("<=", budget))
		tr := r.Statuses.Summary.Truncated
		g.Expect(tr).NotTo(gomega.BeNil())
		g.Expect(tr.BudgetBytes).To(gomega.Equal(int64(budget)))
		g.Expect(tr.Clusters).To(gomega.BeZero(), "every cluster keeps its entry")
		g.Expect(tr.Resources).To(gomega.Equal(int32(MaxResources)))
		g.Expect(tr.Message).To(gomega.HavePrefix(fmt.Sprintf("To stay within its budget of %d bytes, the report ", budget)))
		// The agent puts the errors in order of type: ComparisonError first.
		for i, e := range r.Statuses.ClusterConditions {
			g.Expect(e.Cluster).To(gomega.Equal(cluster(i)))
			g.Expect(e.Conditions[0].Type).To(gomega.Equal("ComparisonError"), "the first error of %s", e.Cluster)
			g.Expect(longError("comparison", cluster(i), 4096)).To(gomega.HavePrefix(strings.TrimSuffix(e.Conditions[0].Message, clusterreport.Ellipsis)))
		}
		g.Eventually(func(g gomega.Gomega) {
			occurrences, notes := events(g, ReasonReportTruncated)
			g.Expect(occurrences).To(gomega.Equal(1))
			g.Expect(notes).To(gomega.ConsistOf("Warning: " + tr.Message))
		}).Should(gomega.Succeed())
	})

	t.Run("the errors clear: full detail again", func(t *testing.T) {
		g := gomega.NewWithT(t)
		setAgentReports(false)
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Statuses.Summary).To(gomega.Equal(appsv1alpha1.ReportSummary{
				Clusters: "2000", Synced: "2000", NotSynced: "0", Healthy: "2000", NotHealthy: "0", InProgress: "0", Stale: "0"}))
		}, 5*time.Minute, time.Second).Should(gomega.Succeed())
		r := getReport(g)
		t.Logf("at full detail: %d bytes stored", jsonSize(t, r))
		g.Expect(jsonSize(t, r)).To(gomega.BeNumerically("<=", budget))
		g.Expect(r.Statuses.Resources).To(gomega.HaveLen(MaxResources))
		g.Expect(r.Statuses.ClusterConditions).To(gomega.HaveLen(n))
		for _, e := range r.Statuses.ClusterConditions {
			g.Expect(e.SyncRevision).NotTo(gomega.BeEmpty(), "the details of %s", e.Cluster)
			g.Expect(e.OperationStatePhase).To(gomega.Equal("Succeeded"))
		}
		g.Eventually(func(g gomega.Gomega) {
			occurrences, _ := events(g, ReasonReportComplete)
			g.Expect(occurrences).To(gomega.Equal(1))
		}).Should(gomega.Succeed())
		occurrences, _ := events(g, ReasonReportTruncated)
		g.Expect(occurrences).To(gomega.Equal(1), "the cut is announced once, when it starts")
	})

	t.Run("on ACM's CRD: the cut report applies, summary.truncated pruned, the counts exact", func(t *testing.T) {
		g := gomega.NewWithT(t)
		serveReportSchema(ctx, g, env, namespace, documentedReportSchema(), false)
		setAgentReports(true)
		acmSummary := failingSummary
		acmSummary.Stale = "" // not in ACM's schema
		g.Eventually(func(g gomega.Gomega) {
			r := getReport(g)
			g.Expect(r.Statuses.Summary).To(gomega.Equal(acmSummary))
			g.Expect(r.Statuses.ClusterConditions).To(gomega.HaveLen(n))
			g.Expect(r.Statuses.ClusterConditions[0].Conditions).NotTo(gomega.BeEmpty())
			g.Expect(jsonSize(t, r)).To(gomega.BeNumerically("<=", budget))
		}, 5*time.Minute, time.Second).Should(gomega.Succeed())
	})
}

// forEachCluster runs f for 0 to n-1 on a few workers, and fails the test on the first
// error.
func forEachCluster(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var group errgroup.Group
	group.SetLimit(8)
	for i := range n {
		group.Go(func() error {
			if err := f(i); err != nil {
				return fmt.Errorf("cluster %d: %w", i, err)
			}
			return nil
		})
	}
	if err := group.Wait(); err != nil {
		t.Fatal(err)
	}
}

// jsonSize is the size of obj as JSON.
func jsonSize(t *testing.T, obj any) int {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// reportCRDSchema reads the report's schema from manifests/crds.
func reportCRDSchema(t *testing.T) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "crds", "apps.open-cluster-management.io_multiclusterapplicationsetreports.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := fleet.DecodeYAML(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("decode the report CRD: %v (%d objects)", err, len(objs))
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// serveReportSchema makes the apiserver serve schema for the report CRD, and waits until
// a report created in namespace keeps summary.truncated, or prunes it, as truncated
// says the schema does.
func serveReportSchema(ctx context.Context, g *gomega.WithT, env *testenv.Env, namespace string, schema *apiextensionsv1.JSONSchemaProps, truncated bool) {
	scheme, err := hubcache.NewScheme()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	crds, err := client.New(env.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := crds.Get(ctx, types.NamespacedName{Name: ReportCRDName}, crd); err != nil {
			return err
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema.DeepCopy()}
		}
		return crds.Update(ctx, crd)
	}).Should(gomega.Succeed())
	g.Eventually(func(g gomega.Gomega) {
		probe := &appsv1alpha1.MulticlusterApplicationSetReport{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "schema-probe"},
			Statuses: appsv1alpha1.AppConditions{Summary: appsv1alpha1.ReportSummary{
				Clusters: "1", Truncated: &appsv1alpha1.ReportTruncation{BudgetBytes: 1}}},
		}
		g.Expect(env.Client.Create(ctx, probe, client.DryRunAll)).To(gomega.Succeed())
		g.Expect(probe.Statuses.Summary.Truncated != nil).To(gomega.Equal(truncated), "summary.truncated served")
	}).Should(gomega.Succeed())
}
