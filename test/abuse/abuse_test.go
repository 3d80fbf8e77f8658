package abuse

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/appsetreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/propagation"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// Names of the healthy Applications the bad input must not harm.
const (
	// bystanderApp runs on clusterGood, which no case touches.
	bystanderApp = "bystander"
	// victimApp runs on clusterA, whose report the report cases corrupt.
	victimApp = "victim"
)

// harmless is what "nothing else is harmed" compares: the bystander's work and hub
// status, the report's entry of the bystander, and every cluster's report as stored.
type harmless struct {
	workResourceVersion string
	workGeneration      int64
	appResourceVersion  string
	appStatus           map[string]any
	reportEntry         appsv1alpha1.ClusterCondition
	agentReports        map[string][]metav1.Condition
}

func (s *suite) snapshot() harmless {
	s.T.Helper()
	work := s.WaitForWork(bystanderApp, clusterGood)
	app := s.GetApp(bystanderApp)
	status, _, _ := unstructured.NestedMap(app.Object, "status")
	entry := s.reportEntry(bystanderApp)
	s.G.Expect(entry).NotTo(gomega.BeNil())
	h := harmless{
		workResourceVersion: work.ResourceVersion, workGeneration: work.Generation,
		appResourceVersion: app.GetResourceVersion(), appStatus: status, reportEntry: *entry,
		agentReports: map[string][]metav1.Condition{},
	}
	for _, cluster := range []string{clusterGood, clusterA, clusterB, clusterUnbound} {
		h.agentReports[cluster] = s.agentConditions(cluster)
	}
	return h
}

// expectUnharmed checks that the bystander and every cluster's report are as before.
func (s *suite) expectUnharmed(before harmless) {
	s.T.Helper()
	after := s.snapshot()
	s.G.Expect(after.workResourceVersion).To(gomega.Equal(before.workResourceVersion), "the bystander's ManifestWork was written")
	s.G.Expect(after.workGeneration).To(gomega.Equal(before.workGeneration), "the bystander's ManifestWork changed")
	s.G.Expect(after.appStatus).To(gomega.Equal(before.appStatus), "the bystander's hub status changed")
	s.G.Expect(after.appResourceVersion).To(gomega.Equal(before.appResourceVersion), "the bystander's hub Application was written")
	s.G.Expect(after.reportEntry).To(gomega.Equal(before.reportEntry), "the bystander's report entry changed")
	for cluster, conditions := range before.agentReports {
		s.G.Expect(after.agentReports[cluster]).To(gomega.Equal(conditions), "the report of cluster %s changed", cluster)
	}
}

// propagate creates a healthy pulled Application on cluster, plays the work agent and
// the cluster's agent for it, and waits until the hub shows it Healthy with its
// resources, in its status and in the report. It returns the app's entry of the agent
// report.
func (s *suite) propagate(name, cluster string) clusterreport.App {
	s.T.Helper()
	s.Create(s.application(name, cluster))
	work := s.WaitForWork(name, cluster)
	s.setFeedback(client.ObjectKeyFromObject(work), "Synced", "Healthy")
	return reportedApp(name, work, name+"-web")
}

// expectShownHealthy waits until the hub shows app Healthy with its resource, with no
// condition but the ones the agent reported, in its status and in the report.
func (s *suite) expectShownHealthy(name string) {
	s.T.Helper()
	s.G.Eventually(func(g gomega.Gomega) {
		app := s.GetApp(name)
		health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
		g.Expect(health).To(gomega.Equal("Healthy"))
		resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
		g.Expect(resources).To(gomega.HaveLen(1))
		conditions, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
		g.Expect(conditions).To(gomega.BeEmpty())
		entry := s.reportEntry(name)
		g.Expect(entry).NotTo(gomega.BeNil())
		g.Expect(entry.HealthStatus).To(gomega.Equal("Healthy"))
		g.Expect(entry.Conditions).To(gomega.BeEmpty())
	}).Should(gomega.Succeed())
}

func TestAbuse(t *testing.T) {
	s := startHub(t)
	g := s.G

	// The healthy fleet: the bystander on the good cluster, the victim on cluster A, each
	// applied, reported and shown on the hub.
	bystander := s.propagate(bystanderApp, clusterGood)
	victim := s.propagate(victimApp, clusterA)
	goodReport := s.encodeReport([]clusterreport.App{bystander})
	victimReport := s.encodeReport([]clusterreport.App{victim})
	s.setAgentConditions(clusterGood, goodReport)
	s.setAgentConditions(clusterA, victimReport)
	s.setAgentConditions(clusterB, s.encodeReport(nil))
	s.setAgentConditions(clusterUnbound, s.encodeReport(nil))
	s.expectShownHealthy(bystanderApp)
	s.expectShownHealthy(victimApp)
	before := s.snapshot()

	// run runs one case, then checks that nothing else was harmed.
	run := func(name string, abuse func(s *suite)) {
		t.Run(name, func(t *testing.T) {
			s := s.sub(t)
			abuse(s)
			s.expectUnharmed(before)
		})
	}

	run("01 unknown cluster", func(s *suite) {
		s.Create(s.application("to-nowhere", "ghost"))
		s.ExpectPropagationError("to-nowhere", propagation.ReasonClusterNotFound, `"ghost"`, "does not exist")
		s.G.Consistently(func() []string { return s.WorkKeys("to-nowhere") }, "500ms").Should(gomega.BeEmpty())
	})

	run("02 addon not enabled", func(s *suite) {
		s.Create(s.application("not-opted-in", clusterNoAddon))
		s.ExpectPropagationError("not-opted-in", propagation.ReasonAddonNotEnabled, clusterNoAddon, addonName)
		s.G.Consistently(func() []string { return s.WorkKeys("not-opted-in") }, "500ms").Should(gomega.BeEmpty())
	})

	run("03 namespace not bound to the cluster", func(s *suite) {
		s.Create(s.application("trespasser", clusterUnbound))
		s.ExpectPropagationError("trespasser", propagation.ReasonClusterNotBoundToNamespace, appsNamespace, clusterUnbound)
		s.G.Consistently(func() []string { return s.WorkKeys("trespasser") }, "500ms").Should(gomega.BeEmpty())
	})

	run("04 malformed label value", func(s *suite) {
		s.propagate("flaky-label", clusterA)
		work := s.WaitForWork("flaky-label", clusterA)
		// The apiserver refuses a value with a space: it never reaches the manager.
		app := s.GetApp("flaky-label")
		app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "yes please"})
		s.G.Expect(apierrors.IsInvalid(s.C.Update(s.Ctx, app))).To(gomega.BeTrue(), "the apiserver took a label value with a space")
		s.UpdateApp("flaky-label", func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "yes_please"})
		})
		s.ExpectPropagationError("flaky-label", propagation.ReasonMalformedLabel, "yes_please", "left as they are")
		// The last good work is kept, untouched.
		s.G.Consistently(func() string { return s.WaitForWork("flaky-label", clusterA).ResourceVersion }, "1s").
			Should(gomega.Equal(work.ResourceVersion))
		s.deleteApp("flaky-label")
	})

	run("05 remote destination without an override", func(s *suite) {
		// The reference: without the destination annotations, the pulled Application
		// deploys to its own cluster, whatever server the hub Application names.
		app := s.application("far-away", clusterA)
		s.G.Expect(unstructured.SetNestedField(app.Object, "https://api.remote.example.com:6443", "spec", "destination", "server")).To(gomega.Succeed())
		s.Create(app)
		work := s.WaitForWork("far-away", clusterA)
		destination, _, _ := unstructured.NestedMap(testenv.Payload(s.T, work).Object, "spec", "destination")
		s.G.Expect(destination).To(gomega.Equal(map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"}))
		s.G.Expect(s.Condition("far-away", argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
		s.deleteApp("far-away")
	})

	run("06 oversized Application", func(s *suite) {
		s.propagate("bloated", clusterA)
		work := s.WaitForWork("bloated", clusterA)
		s.UpdateApp("bloated", func(app *unstructured.Unstructured) {
			values := strings.Repeat("x", propagation.MaxManifestsSize)
			s.G.Expect(unstructured.SetNestedField(app.Object, map[string]any{"values": values}, "spec", "source", "helm")).To(gomega.Succeed())
		})
		s.ExpectPropagationError("bloated", propagation.ReasonPayloadTooLarge, "bytes", fmt.Sprint(propagation.MaxManifestsSize))
		// The last good work is kept, untouched.
		s.G.Consistently(func() string { return s.WaitForWork("bloated", clusterA).ResourceVersion }, "1s").
			Should(gomega.Equal(work.ResourceVersion))
		s.deleteApp("bloated")
	})

	run("07 a name of 253 characters", func(s *suite) {
		name := "long-" + strings.Repeat("n", 253-len("long-"))
		s.Create(s.application(name, clusterA))
		work := s.WaitForWork(name, clusterA)
		s.G.Expect(validation.IsDNS1123Subdomain(work.Name)).To(gomega.BeEmpty())
		s.G.Expect(len(work.Name)).To(gomega.BeNumerically("<=", argoapp.MaxManifestWorkNameLength))
		s.G.Expect(testenv.Payload(s.T, work).GetName()).To(gomega.Equal(name), "the spoke Application keeps its name")
		s.G.Expect(s.Condition(name, argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
		s.deleteApp(name)
	})

	// The report cases corrupt cluster A's report of the victim. The hub records an
	// Event on the ManagedClusterAddOn, marks the victim in its status and in the report,
	// keeps showing the last good report, and recovers when the agent reports well again.
	corruptReport := func(s *suite, agentConditions []metav1.Condition, words ...string) {
		s.T.Helper()
		s.setAgentConditions(clusterA, agentConditions)
		s.ExpectEvent("ManagedClusterAddOn", clusterA, addonName, corev1.EventTypeWarning, appsetreport.ReasonInvalidAgentReport, words...)
		s.G.Eventually(func(g gomega.Gomega) {
			message := s.Condition(victimApp, observed.ConditionInvalidReport)
			g.Expect(message).To(gomega.SatisfyAll(gomega.ContainSubstring("cluster "+clusterA), gomega.ContainSubstring("last good status")))
			g.Expect(message).To(gomega.SatisfyAll(testenv.ContainsAll(words)...))
			g.Expect(conditionTypes(s.reportEntry(victimApp))).To(gomega.Equal([]string{observed.ConditionInvalidReport}))
		}).Should(gomega.Succeed())
		// No data lost: the last good report is still shown.
		app := s.GetApp(victimApp)
		resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
		s.G.Expect(resources).To(gomega.ConsistOf(gomega.HaveKeyWithValue("name", victimApp+"-web")))
		s.G.Expect(s.appSetReport().Statuses.Resources).To(gomega.ContainElement(appsv1alpha1.ResourceRef{
			APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: victimApp + "-web"}))
		s.G.Expect(s.reportEntry(victimApp).HealthStatus).To(gomega.Equal("Healthy"))

		// The agent reports well again: the mark goes.
		s.setAgentConditions(clusterA, victimReport)
		s.expectShownHealthy(victimApp)
	}
	victimType := clusterreport.AppConditionType(spokeNamespace, victimApp)
	withVictimMessage := func(message func(string) string) []metav1.Condition {
		conditions := s.encodeReport([]clusterreport.App{victim})
		for i := range conditions {
			if conditions[i].Type == victimType {
				conditions[i].Message = message(conditions[i].Message)
			}
		}
		return conditions
	}

	run("08 malformed agent report", func(s *suite) {
		corruptReport(s, withVictimMessage(func(string) string { return `{"v":1,"namespace":` }), victimType, "malformed report")
	})

	run("09 oversized agent report", func(s *suite) {
		// Each entry within the API's limit, together over the budget.
		var padding []metav1.Condition
		for i := range clusterreport.MaxBytes/30000 + 1 {
			padding = append(padding, metav1.Condition{
				Type:    clusterreport.AppConditionType(spokeNamespace, fmt.Sprintf("padding-%d", i)),
				Message: `{"v":1,"pad":"` + strings.Repeat("x", 30000) + `"}`,
			})
		}
		corruptReport(s, s.encodeReport([]clusterreport.App{victim}, padding...), "report too large", "more than 262144")
	})

	run("10 agent report in the wrong format version", func(s *suite) {
		corruptReport(s, withVictimMessage(func(m string) string { return strings.Replace(m, `"v":1`, `"v":2`, 1) }),
			victimType, "unsupported report version", "version 2")
	})

	run("11 a report written by another cluster's agent", func(s *suite) {
		// The addon framework grants each agent its hub Role; wait for cluster B's.
		s.G.Eventually(func() error {
			return s.C.Get(s.Ctx, types.NamespacedName{Namespace: clusterB, Name: addon.HubRole(addonName).Name}, &rbacv1.RoleBinding{})
		}).Should(gomega.Succeed(), "the addon framework did not grant cluster %s's agent its hub role", clusterB)
		// Cluster B's agent, as its client certificate presents it.
		cfg := rest.CopyConfig(s.env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: agent.DefaultUser(clusterB, addonName, addon.AgentName),
			Groups:   append(agent.DefaultGroups(clusterB, addonName), "system:authenticated"),
		}
		agentB := addonclient.NewForConfigOrDie(cfg)
		forged, err := json.Marshal(map[string]any{
			"apiVersion": "addon.open-cluster-management.io/v1beta1", "kind": "ManagedClusterAddOn",
			"metadata": map[string]any{"name": addonName},
			"status": map[string]any{"conditions": []any{map[string]any{
				"type": victimType, "status": "False", "reason": "OutOfSync_Degraded",
				"message":            `{"v":1,"namespace":"argocd","name":"victim","health":{"status":"Degraded"},"observedAt":"2026-01-02T03:04:05Z"}`,
				"lastTransitionTime": "2026-01-02T03:04:05Z"}}},
		})
		s.G.Expect(err).NotTo(gomega.HaveOccurred())
		patch := func(cluster string) error {
			_, err := agentB.AddonV1beta1().ManagedClusterAddOns(cluster).Patch(s.Ctx, addonName, types.ApplyPatchType, forged,
				metav1.PatchOptions{FieldManager: "argocd-pull-agent", Force: ptr.To(true)}, "status")
			return err
		}
		err = patch(clusterA)
		s.G.Expect(apierrors.IsForbidden(err)).To(gomega.BeTrue(), "cluster %s's agent patched cluster %s's report: %v", clusterB, clusterA, err)
		s.G.Expect(err.Error()).To(gomega.ContainSubstring(clusterA))
		// The same identity may write its own report: the refusal is about the identity.
		s.G.Expect(patch(clusterB)).To(gomega.Succeed())
		s.setAgentConditions(clusterB, s.encodeReport(nil))
		s.G.Expect(s.agentConditions(clusterA)).To(gomega.Equal(before.agentReports[clusterA]))
		s.expectShownHealthy(victimApp)
	})

	run("12 an app that moves clusters in a loop", func(s *suite) {
		s.propagate("nomad", clusterA)
		// Count the creations and deletions of the app's works from here on.
		var mu sync.Mutex
		writes := map[watch.EventType]int{}
		ctx, stop := context.WithCancel(s.Ctx)
		defer stop()
		watcher, err := client.NewWithWatch(s.env.Config, client.Options{Scheme: s.env.Scheme})
		s.G.Expect(err).NotTo(gomega.HaveOccurred())
		existing := &workv1.ManifestWorkList{}
		s.G.Expect(watcher.List(ctx, existing)).To(gomega.Succeed())
		w, err := watcher.Watch(ctx, &workv1.ManifestWorkList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: existing.ResourceVersion}})
		s.G.Expect(err).NotTo(gomega.HaveOccurred())
		go func() {
			for e := range w.ResultChan() {
				work, ok := e.Object.(*workv1.ManifestWork)
				if ok && work.Annotations[argoapp.AnnotationHubApplicationName] == "nomad" && e.Type != watch.Modified {
					mu.Lock()
					writes[e.Type]++
					mu.Unlock()
				}
			}
		}()
		defer w.Stop()

		const flips = 10
		cluster := clusterA
		for range flips {
			cluster = map[string]string{clusterA: clusterB, clusterB: clusterA}[cluster]
			s.UpdateApp("nomad", func(app *unstructured.Unstructured) {
				testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedCluster, cluster)
			})
		}
		final, other := cluster, map[string]string{clusterA: clusterB, clusterB: clusterA}[cluster]
		work := s.WaitForWork("nomad", final)
		s.G.Expect(s.WorkKeys("nomad")).To(gomega.ContainElement(final + "/" + work.Name))
		s.G.Expect(s.WorkKeys("nomad")).NotTo(gomega.ContainElement(gomega.HavePrefix(other + "/")))
		s.ExpectEvent(argoapp.KindApplication, appsNamespace, "nomad", corev1.EventTypeNormal, propagation.ReasonManifestWorkDeleted, other+"/")

		// It settles: the app, its work and the counts stay still, and they are bounded by
		// one creation and one deletion per move.
		settled := func() string {
			app := s.GetApp("nomad")
			keys := s.WorkKeys("nomad")
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("app %s works %v writes %v", app.GetResourceVersion(), keys, writes)
		}
		var last string
		s.G.Eventually(func() bool {
			now := settled()
			same := now == last
			last = now
			return same
		}).WithPolling(500 * time.Millisecond).Should(gomega.BeTrue())
		s.G.Consistently(settled, testenv.ConsistentlyTimeout).Should(gomega.Equal(last), "the moving app does not settle")
		mu.Lock()
		created, deleted := writes[watch.Added], writes[watch.Deleted]
		mu.Unlock()
		s.T.Logf("%d moves: %d works created, %d deleted", flips, created, deleted)
		s.G.Expect(created).To(gomega.BeNumerically("<=", flips))
		s.G.Expect(deleted).To(gomega.BeNumerically("<=", flips))
		s.G.Expect(created).To(gomega.BeNumerically(">=", 1))
		s.G.Expect(deleted-created).To(gomega.Equal(0), "one work before, one after")
		s.G.Expect(s.Condition("nomad", argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
		s.deleteApp("nomad")
	})

	// Last, all the bad input together has not harmed anything either, and stays so.
	g.Consistently(func() string { return s.WaitForWork(bystanderApp, clusterGood).ResourceVersion }, "1s").
		Should(gomega.Equal(before.workResourceVersion))
}
