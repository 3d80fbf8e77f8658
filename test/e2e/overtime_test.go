package e2e

// The pull model over time, with the real ApplicationSet controller, OCM and Argo CD: a
// settled fleet is quiet (the soak's first minute), a soak of real changes writes each
// object a bounded number of times per change, a manual sync from the hub runs on the spoke, a cluster that leaves a
// PlacementDecision for a moment keeps its work, and refused Applications get no work.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	workv1 "open-cluster-management.io/api/work/v1"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

var _ = Describe("An ApplicationSet of pulled apps over time", Ordered, ContinueOnFailure, func() {
	const (
		appSet = "overtime-appset"
		label  = "e2e.argocd-pull/overtime-appset"
		// the documented ApplicationSet deploys the guestbook to this namespace
		destNamespace = "overtime-appset"
	)
	var (
		hub     hubClients
		targets []*fleet.ManagedCluster
		health  string
	)
	hubApp := func(mc *fleet.ManagedCluster) string { return mc.Name + "-" + appSet }

	BeforeAll(func(ctx SpecContext) {
		hub = newHubClients()
		targets = theFleet.Clusters[:2]
		health = settledHealth(ctx)
		hub.optIn(ctx, targets...)
		hub.labelClusters(ctx, label, targets...)
		hub.placeByLabel(ctx, fleet.ArgoCDNamespace, appSet, label, targets...)
		Expect(hub.applier.ApplyYAML(ctx, fleet.ArgoCDNamespace,
			fleet.GuestbookApplicationSetYAML(appSet, appSet, appSet, theFleet.Git.URL(), destNamespace))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			hub.deleteAndWait(ctx, hub.dyn.Resource(appSetsGVR).Namespace(fleet.ArgoCDNamespace), appSet)
			for _, mc := range targets {
				hub.deleteAndWait(ctx, hub.apps(fleet.ArgoCDNamespace), hubApp(mc))
			}
			hub.deleteAndWait(ctx, hub.dyn.Resource(reportsGVR).Namespace(fleet.ArgoCDNamespace), appSet)
		})
	})

	// settled waits until every cluster synced head, and the works' feedback, the hub
	// Applications and the report show what the spokes show.
	settled := func(ctx context.Context, head string) {
		want := "Synced/" + head + "/" + health
		for _, mc := range targets {
			var spoke map[string]string
			eventually(ctx, func(ctx context.Context) (map[string]string, error) {
				u, err := spokeApps(mc).Get(ctx, hubApp(mc), metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				spoke, err = feedbackView(u)
				return spoke, err
			}).Should(And(HaveKeyWithValue("state", want), HaveKeyWithValue(argoapp.FeedbackOperationStatePhase, "Succeeded")),
				"the spoke Application on %s", mc.Name)
			hub.workShows(ctx, fleet.ArgoCDNamespace, hubApp(mc), spoke)
			eventually(ctx, func(ctx context.Context) (string, error) {
				u, err := hub.apps(fleet.ArgoCDNamespace).Get(ctx, hubApp(mc), metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				st, err := argoapp.DecodeStatus(u)
				if err != nil {
					return "", err
				}
				s, err := appState(u)
				return fmt.Sprintf("%s/%d resources", s, len(st.Resources)), err
			}).Should(Equal(want+"/2 resources"), "the hub Application %s", hubApp(mc))
		}
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			u, err := hub.dyn.Resource(reportsGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, appSet, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			var report appsv1alpha1.MulticlusterApplicationSetReport
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &report); err != nil {
				return nil, err
			}
			var rows []string
			for _, c := range report.Statuses.ClusterConditions {
				rows = append(rows, c.Cluster+": "+c.SyncStatus+"/"+strings.Join(c.SyncRevisions, ",")+"/"+c.HealthStatus)
			}
			return rows, nil
		}).Should(ConsistOf(targets[0].Name+": "+want, targets[1].Name+": "+want), "the report")
	}

	It("causes no write once settled, then writes each hub Application, ManifestWork and report a bounded number of times per real change over a soak of four changes", func(ctx SpecContext) {
		// The first round changes nothing: once settled, and once the hub went 20 s
		// without writing one (what earlier specs left settles first), the hub
		// Applications, the ManifestWorks and the reports are not written at all in its
		// minute (the apiserver's request counts, every object of the three resources).
		// Each other round makes one change, waits until the spokes and the hub show it,
		// then until the hub has gone changeQuiet without writing an Application, a work
		// or a report: its writes are over before the next round begins.
		// In those rounds, each hub write must be explained by a real change: one of the test's, or one of
		// the spoke Application's, which the hub follows. Per round, an object may be
		// written at most:
		//   hub Application: the writes of the change itself (template: the
		//     ApplicationSet controller's update, 1; commit: the refresh annotation set,
		//     and removed once delivered, 2) + one status write per write of its spoke
		//     Application in the round (the status mirror follows the spoke, never more
		//     often than it changes);
		//   ManifestWork: a spec write per change of the hub Application's spec (template
		//     1; commit 2: the refresh carried, then dropped), the work agent's Applied
		//     of each of those generations (the same number again), and one status
		//     write per write of the spoke Application (the feedback);
		//   report: one write per write of any of its spoke Applications.
		// A write loop, or a write with no change behind it, exceeds that.
		type kind string
		const (
			noChange       kind = "no change"          // the settled fleet, left alone
			templateChange kind = "template change"    // the ApplicationSet template's spec.info
			commitChange   kind = "commit and refresh" // a git commit, and a hard refresh from the hub
		)
		ownWrites := map[kind]int{noChange: 0, templateChange: 1, commitChange: 2}

		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		settled(ctx, head)
		// What the specs before this one left (their apps and works being deleted, their
		// placements rewritten) settles too before the first round counts the hub's writes.
		before := waitForQuietHub(ctx, 20*time.Second, 4*time.Minute, pullResources...)
		servicePath := filepath.Join(fleet.GuestbookPath, "service.yaml")
		original, err := os.ReadFile(filepath.Join(theFleet.Git.Dir, servicePath))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			_, err := theFleet.Git.Commit("guestbook: the Service as it was", map[string]string{servicePath: string(original)})
			Expect(err).NotTo(HaveOccurred())
		})

		names := map[string]bool{}
		for _, mc := range targets {
			names[hubApp(mc)] = true
		}
		isOurs := map[string]func(*unstructured.Unstructured) bool{
			resourceApplications: func(u *unstructured.Unstructured) bool { return names[u.GetName()] },
			resourceWorks: func(u *unstructured.Unstructured) bool {
				return u.GetAnnotations()[argoapp.AnnotationHostingApplicationSet] == fleet.ArgoCDNamespace+"/"+appSet
			},
			resourceReports: func(u *unstructured.Unstructured) bool { return u.GetName() == appSet },
		}
		spokeHistories := map[string]*history{} // by cluster
		for _, mc := range targets {
			spokeHistories[mc.Name] = recordHistory(ctx, spokeApps(mc), metav1.ListOptions{FieldSelector: "metadata.name=" + hubApp(mc)})
		}
		histories := map[string]*history{
			resourceApplications: recordHistory(ctx, hub.apps(fleet.ArgoCDNamespace), metav1.ListOptions{}),
			resourceWorks:        recordHistory(ctx, hub.dyn.Resource(worksGVR), metav1.ListOptions{LabelSelector: argoapp.LabelApplicationSet}),
			resourceReports:      recordHistory(ctx, hub.dyn.Resource(reportsGVR).Namespace(fleet.ArgoCDNamespace), metav1.ListOptions{}),
		}
		const (
			settledRound = time.Minute // round 0
			// changeQuiet ends each other round, once its change shows. What follows a
			// spoke write on the hub comes within about a second: the work agent watches
			// the spoke Application for its status feedback (render.go asks for
			// FeedbackWatchType), and the report's pace and the Progressing hold are 1 s.
			// 20 s leaves a loaded machine room for them, and outlasts the fallback of
			// that watch, the agent's periodic scrape (every 10 to 19 s).
			changeQuiet = 20 * time.Second
		)
		var (
			rounds []kind      // the change of each round
			starts []time.Time // when each round began
			// settledWrites are the writes of the first round, the settled minute.
			settledWrites map[string]int
		)
		for i := range 5 {
			start := time.Now()
			starts = append(starts, start)
			if i == 0 {
				By("round 0: no change: the settled fleet stays quiet")
				rounds = append(rounds, noChange)
			} else if i%2 == 0 {
				By(fmt.Sprintf("round %d: the ApplicationSet template's spec changes", i))
				patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"info":[{"name":"soak-round","value":"%d"}]}}}}`, i)
				_, err := hub.dyn.Resource(appSetsGVR).Namespace(fleet.ArgoCDNamespace).Patch(ctx, appSet, types.MergePatchType, patch, metav1.PatchOptions{})
				Expect(err).NotTo(HaveOccurred())
				rounds = append(rounds, templateChange)
				for _, mc := range targets {
					eventually(ctx, func(ctx context.Context) (any, error) {
						u, err := spokeApps(mc).Get(ctx, hubApp(mc), metav1.GetOptions{})
						if err != nil {
							return nil, err
						}
						info, _, err := unstructured.NestedSlice(u.Object, "spec", "info")
						return info, err
					}).Should(ConsistOf(map[string]any{"name": "soak-round", "value": fmt.Sprint(i)}), "the change reached %s", mc.Name)
				}
			} else {
				By(fmt.Sprintf("round %d: a commit, and a hard refresh from the hub", i))
				content := strings.Replace(string(original), "metadata:\n", fmt.Sprintf("metadata:\n  labels: {soak-round: %q}\n", fmt.Sprint(i)), 1)
				Expect(content).NotTo(Equal(string(original)))
				head, err = theFleet.Git.Commit(fmt.Sprintf("soak round %d", i), map[string]string{servicePath: content})
				Expect(err).NotTo(HaveOccurred())
				refresh := fmt.Sprintf(`{"metadata":{"annotations":{%q:"hard"}}}`, argoapp.AnnotationRefresh)
				for _, mc := range targets {
					_, err := hub.apps(fleet.ArgoCDNamespace).Patch(ctx, hubApp(mc), types.MergePatchType, []byte(refresh), metav1.PatchOptions{})
					Expect(err).NotTo(HaveOccurred())
				}
				rounds = append(rounds, commitChange)
			}
			if i > 0 {
				settled(ctx, head)
				waitForQuietHub(ctx, changeQuiet, 3*time.Minute, pullResources...)
			} else {
				sleep(ctx, time.Until(start.Add(settledRound)))
				window := time.Since(before.at)
				d := readHubWrites(ctx).since(before)
				GinkgoWriter.Printf("hub writes in %v with the ApplicationSet settled: %s\n", window.Round(time.Second), d)
				AddReportEntry("settled hub writes per minute", fmt.Sprintf("applications=%.0f manifestworks=%.0f reports=%.0f managedclusteraddons=%.0f",
					d.perMinute(resourceApplications, window), d.perMinute(resourceWorks, window),
					d.perMinute(resourceReports, window), d.perMinute("managedclusteraddons", window)))
				settledWrites = map[string]int{
					resourceApplications: d.of(resourceApplications), resourceWorks: d.of(resourceWorks), resourceReports: d.of(resourceReports),
				}
			}
		}
		window := time.Since(before.at)
		d := readHubWrites(ctx).since(before)
		for _, h := range histories {
			h.Stop()
		}
		spokeWrites := map[string][]int{} // by cluster, by round
		allSpokeWrites := make([]int, len(rounds))
		for _, mc := range targets {
			spokeHistories[mc.Name].Stop()
			for _, w := range spokeHistories[mc.Name].WritesByObjectPerWindow(nil, starts) {
				spokeWrites[mc.Name] = w
				for i, n := range w {
					allSpokeWrites[i] += n
				}
			}
			GinkgoWriter.Printf("spoke Application on %s: writes by round %v\n", mc.Name, spokeWrites[mc.Name])
		}
		GinkgoWriter.Printf("hub writes in the %v soak (%v): %s\n", window.Round(time.Second), rounds, d)

		// cluster is the managed cluster that a hub Application or work is about.
		cluster := func(key string) string {
			for _, mc := range targets {
				if strings.HasPrefix(key, mc.Name+"/") || strings.HasPrefix(key, fleet.ArgoCDNamespace+"/"+hubApp(mc)+" ") {
					return mc.Name
				}
			}
			return ""
		}
		allowed := func(resource, key string, round int) int {
			own := ownWrites[rounds[round]]
			switch resource {
			case resourceApplications:
				return own + spokeWrites[cluster(key)][round]
			case resourceWorks:
				return 2*own + spokeWrites[cluster(key)][round]
			default:
				return allSpokeWrites[round]
			}
		}
		var over []string
		for _, resource := range pullResources {
			writes := histories[resource].WritesByObjectPerWindow(isOurs[resource], starts)
			Expect(writes).NotTo(BeEmpty(), "the %s of the ApplicationSet were recorded", resource)
			for _, key := range slices.Sorted(maps.Keys(writes)) {
				bound := make([]int, len(rounds))
				for i := range rounds {
					bound[i] = allowed(resource, key, i)
					if writes[key][i] > bound[i] {
						over = append(over, fmt.Sprintf("%s %s: %d writes in round %d (%s), at most %d",
							resource, key, writes[key][i], i, rounds[i], bound[i]))
					}
				}
				GinkgoWriter.Printf("%s %s: writes by round %v (at most %v)\n", resource, key, writes[key], bound)
			}
		}
		quietWhenSettled := maps.Equal(settledWrites, map[string]int{resourceApplications: 0, resourceWorks: 0, resourceReports: 0})
		if len(over) > 0 || !quietWhenSettled {
			for _, resource := range pullResources {
				keep := isOurs[resource]
				if !quietWhenSettled {
					keep = nil // every object the recording saw: what was written in the settled minute
				}
				GinkgoWriter.Printf("history of the %s:%s\n", resource, describeVersions(histories[resource].Versions(keep), soakDetail))
			}
			for _, mc := range targets {
				GinkgoWriter.Printf("history of the spoke Application on %s:%s\n", mc.Name, describeVersions(spokeHistories[mc.Name].Versions(nil), soakDetail))
			}
		}
		Expect(quietWhenSettled).To(BeTrue(), "writes in the first minute, once settled: %v", settledWrites)
		Expect(over).To(BeEmpty(), "objects written more often than their changes explain; hub writes in %v: %s", window.Round(time.Second), d)
	})
})

var _ = Describe("Pulled Applications through binding changes, a manual sync and refusals", Ordered, ContinueOnFailure, func() {
	const (
		tenantA = "overtime-a"
		tenantB = "overtime-b"
		label   = "e2e.argocd-pull/overtime-tenant"
	)
	var (
		hub   hubClients
		first *fleet.ManagedCluster
		other *fleet.ManagedCluster
	)
	BeforeAll(func(ctx SpecContext) {
		hub = newHubClients()
		first, other = theFleet.Clusters[0], theFleet.Clusters[1]
		hub.optIn(ctx, first, other)
		hub.labelClusters(ctx, label, first, other)
		for _, ns := range []string{tenantA, tenantB} {
			hub.tenantNamespace(ctx, ns, label, first, other)
		}
	})

	It("runs a manual sync from the hub on the spoke, and keeps the operation on the hub until the spoke ran it", func(ctx SpecContext) {
		const (
			name          = "overtime-manual-sync"
			destNamespace = "overtime-manual-sync"
			user          = "e2e-hub-user"
		)
		hub.createApp(ctx, pulledApp(tenantA, name, first.Name, destNamespace, false))
		spoke := spokeApps(first)
		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) (string, error) {
			st, err := applicationStatus(ctx, spoke, name)
			return st.Sync.Status + "/" + st.Sync.Revision + "/" + st.OperationState.Phase, err
		}).Should(Equal("OutOfSync/"+head+"/"), "without a sync policy the spoke compares and waits")

		hubHistory := recordHistory(ctx, hub.apps(tenantA), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		spokeHistory := recordHistory(ctx, spoke, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		DeferCleanup(hubHistory.Stop)
		DeferCleanup(spokeHistory.Stop)

		By("the hub user syncs, as `argocd app sync` does: it sets .operation on the hub Application")
		requested := time.Now().Truncate(time.Second)
		// The Argo CD server copies the Application's sync options into the operation.
		operation := fmt.Appendf(nil, `{"operation":{"initiatedBy":{"username":%q},"sync":{"revision":%q,"syncOptions":["CreateNamespace=true"]}}}`, user, head)
		_, err = hub.apps(tenantA).Patch(ctx, name, types.MergePatchType, operation, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := spoke.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			by, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "operation", "initiatedBy", "username")
			phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
			message, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "message")
			return by + "/" + phase + ": " + message, nil
		}).WithTimeout(2*time.Minute).Should(HavePrefix(user+"/Succeeded: "), "the spoke's Argo CD ran the hub user's sync")
		_, err = first.Kube.AppsV1().Deployments(destNamespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the sync deployed the guestbook on %s", first.Name)

		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := hub.apps(tenantA).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			_, pending := u.Object["operation"]
			st, err := argoapp.DecodeStatus(u)
			return fmt.Sprintf("%s/%s operation pending=%v", st.Sync.Status, st.OperationState.Phase, pending), err
		}).Should(Equal("Synced/Succeeded operation pending=false"), "the hub shows the sync, and the finished operation left the hub Application")

		By("the hub Application kept .operation until it showed the spoke's operation, started after the request, finished")
		versions := hubHistory.Versions(nil)
		describe := func(u *unstructured.Unstructured) string {
			_, op := u.Object["operation"]
			st, _ := argoapp.DecodeStatus(u)
			return fmt.Sprintf("operation=%v operationState=%s@%s", op, st.OperationState.Phase, st.OperationState.StartedAt)
		}
		delivered, removed := -1, -1
		for i, v := range versions {
			_, op := v.Object.Object["operation"]
			if op && delivered < 0 {
				delivered = i
			}
			if !op && delivered >= 0 {
				removed = i
				break
			}
		}
		Expect(delivered).To(BeNumerically(">=", 0), "the hub history has the operation: %s", describeVersions(versions, describe))
		Expect(removed).To(BeNumerically(">", delivered), "the hub history shows the operation removed: %s", describeVersions(versions, describe))
		st, err := argoapp.DecodeStatus(versions[removed].Object)
		Expect(err).NotTo(HaveOccurred())
		startedAt, err := time.Parse(time.RFC3339, st.OperationState.StartedAt)
		Expect(err).NotTo(HaveOccurred(), "when .operation left the hub Application it showed no operation state of the spoke: %s",
			describeVersions(versions, describe))
		Expect(startedAt).NotTo(BeTemporally("<", requested), "when .operation left the hub Application, the operation state it showed was older than the request: %s",
			describeVersions(versions, describe))
		Expect(st.OperationState.Phase).To(BeElementOf("Succeeded", "Failed", "Error"),
			"when .operation left the hub Application, the spoke's operation had not finished: %s", describeVersions(versions, describe))

		By("the spoke ran the operation once")
		runs := map[string]bool{}
		for _, v := range spokeHistory.Versions(nil) {
			by, _, _ := unstructured.NestedString(v.Object.Object, "status", "operationState", "operation", "initiatedBy", "username")
			started, _, _ := unstructured.NestedString(v.Object.Object, "status", "operationState", "startedAt")
			if by == user {
				runs[started] = true
			}
		}
		Expect(runs).To(HaveLen(1), "the spoke ran the hub user's sync once; runs started at %v", slices.Sorted(maps.Keys(runs)))
	})

	It("keeps the work of a standalone Application whose cluster leaves the PlacementDecision for 10 s", func(ctx SpecContext) {
		const (
			name          = "overtime-transient"
			destNamespace = "overtime-transient"
		)
		hub.createApp(ctx, pulledApp(tenantA, name, other.Name, destNamespace, true))
		spoke := spokeApps(other)
		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := spoke.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return appState(u)
		}).Should(HavePrefix("Synced/"+head+"/"), "synced on %s", other.Name)
		spokeApp, err := spoke.Get(ctx, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		deployment, err := other.Kube.AppsV1().Deployments(destNamespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		ours := func(u *unstructured.Unstructured) bool { return pointsTo(u, tenantA, name) }
		works := recordHistory(ctx, hub.dyn.Resource(worksGVR).Namespace(other.Name), metav1.ListOptions{})
		DeferCleanup(works.Stop)
		Expect(works.Versions(ours)).To(HaveLen(1), "one work before the cluster leaves")

		By("the cluster leaves the PlacementDecision: the real placement controller drops it when its label goes")
		hub.setClusterLabel(ctx, other.Name, label, "")
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			return hub.applier.DecidedClusters(ctx, tenantA, "tenant")
		}).ShouldNot(ContainElement(other.Name))
		left := time.Now()
		eventually(ctx, func(ctx context.Context) (string, error) {
			return hub.propagationError(ctx, tenantA, name)
		}).Should(HavePrefix("ClusterNotBoundToNamespace: "), "the hub Application tells why its cluster gets no changes")
		Expect(warningReasons(ctx, tenantA, name)).To(ContainElement("ClusterNotBoundToNamespace"))
		sleep(ctx, time.Until(left.Add(10*time.Second)))

		By("the cluster comes back")
		hub.setClusterLabel(ctx, other.Name, label, "true")
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			return hub.applier.DecidedClusters(ctx, tenantA, "tenant")
		}).Should(ContainElement(other.Name))
		eventually(ctx, func(ctx context.Context) (string, error) {
			return hub.propagationError(ctx, tenantA, name)
		}).Should(BeEmpty(), "the condition goes once the cluster is bound again")

		versions := works.Versions(ours)
		uids := map[types.UID]bool{}
		for _, v := range versions {
			uids[v.Object.GetUID()] = true
			Expect(v.Type).NotTo(Equal(watch.Deleted), "the work was deleted: %s", describeVersions(versions, nil))
			Expect(v.Object.GetDeletionTimestamp()).To(BeNil(), "the work was being deleted: %s", describeVersions(versions, nil))
		}
		Expect(uids).To(HaveLen(1), "one work throughout: %s", describeVersions(versions, nil))
		after, err := spoke.Get(ctx, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(after.GetUID()).To(Equal(spokeApp.GetUID()), "the spoke Application was never re-created")
		deploymentAfter, err := other.Kube.AppsV1().Deployments(destNamespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(deploymentAfter.UID).To(Equal(deployment.UID), "the spoke's workload was never pruned")
	})

	Describe("refusals", Ordered, func() {
		const (
			bystander     = "overtime-bystander"
			destNamespace = "overtime-bystander"
		)
		var (
			bystanderWork *workv1.ManifestWork
			works         *history
			spokeHistory  *history
		)
		BeforeAll(func(ctx SpecContext) {
			By("the bystander: a pulled Application, settled")
			hub.createApp(ctx, pulledApp(tenantA, bystander, first.Name, destNamespace, true))
			bystanderWork = hub.settledStandalone(ctx, tenantA, bystander, first)
		})
		BeforeEach(func(ctx SpecContext) {
			works = recordHistory(ctx, hub.dyn.Resource(worksGVR).Namespace(first.Name), metav1.ListOptions{})
			spokeHistory = recordHistory(ctx, spokeApps(first), metav1.ListOptions{FieldSelector: "metadata.name=" + bystander})
		})
		// Each refusal leaves the bystander alone: its work is not written, it has no
		// condition, and its spoke Application stays its own.
		AfterEach(func(ctx SpecContext) {
			works.Stop()
			spokeHistory.Stop()
			msg, err := hub.propagationError(ctx, tenantA, bystander)
			Expect(err).NotTo(HaveOccurred())
			Expect(msg).To(BeEmpty(), "the bystander has no %s", argoapp.ConditionOCMPropagationError)
			Expect(works.WritesByObject(func(u *unstructured.Unstructured) bool { return pointsTo(u, tenantA, bystander) })).To(
				Equal(map[string]int{objectKey(workObject(bystanderWork)): 0}), "the bystander's work was not written: %s",
				describeVersions(works.Versions(nil), nil))
			spokeDestination := func(u *unstructured.Unstructured) string {
				ns, _, _ := unstructured.NestedString(u.Object, "spec", "destination", "namespace")
				return "destination " + ns
			}
			versions := spokeHistory.Versions(nil)
			Expect(versions).NotTo(BeEmpty())
			for _, v := range versions {
				Expect(v.Type).NotTo(Equal(watch.Deleted), "the bystander's spoke Application was deleted: %s", describeVersions(versions, spokeDestination))
				Expect(v.Object.GetUID()).To(Equal(versions[0].Object.GetUID()), "the bystander's spoke Application was re-created: %s",
					describeVersions(versions, spokeDestination))
				Expect(spokeDestination(v.Object)).To(Equal("destination "+destNamespace), "the spoke Application stayed the bystander's: %s",
					describeVersions(versions, spokeDestination))
			}
		})

		It("refuses a second hub Application for the same spoke Application: SpokeApplicationConflict", func(ctx SpecContext) {
			// Same name in another namespace, with the documented app-namespace annotation:
			// the same spoke Application on the same cluster.
			hub.createApp(ctx, pulledApp(tenantB, bystander, first.Name, destNamespace+"-b", true))
			hub.expectRefused(ctx, tenantB, bystander, "SpokeApplicationConflict")
		})

		It("refuses a pulled Application without skip-reconcile, which the hub Argo CD would push too: MissingSkipReconcile", func(ctx SpecContext) {
			noSkip := pulledApp(tenantA, "overtime-no-skip", first.Name, "overtime-no-skip", true)
			annotations := noSkip.GetAnnotations()
			delete(annotations, argoapp.AnnotationSkipReconcile)
			noSkip.SetAnnotations(annotations)
			// Without skip-reconcile the resources finalizer would be the hub Argo CD's to
			// remove, and the fleet's hub runs no application-controller.
			noSkip.SetFinalizers(nil)
			hub.createApp(ctx, noSkip)
			hub.expectRefused(ctx, tenantA, noSkip.GetName(), "MissingSkipReconcile")
		})

		It("refuses the hub's own cluster, named local-cluster or labelled local-cluster=true: LocalClusterNotSupported", func(ctx SpecContext) {
			for _, mc := range []struct{ name, labels string }{
				{"local-cluster", "{}"},
				{"overtime-hub-itself", `{local-cluster: "true"}`},
			} {
				// A ManagedCluster without a klusterlet: the hub's own, as ACM registers it.
				Expect(hub.applier.ApplyYAML(ctx, "", fmt.Appendf(nil, `
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: %s, labels: %s}
spec: {hubAcceptsClient: true}
`, mc.name, mc.labels))).To(Succeed())
				DeferCleanup(func(ctx SpecContext) {
					hub.deleteAndWait(ctx, hub.dyn.Resource(managedClusterGVR), mc.name)
				})
				app := pulledApp(tenantA, "overtime-"+mc.name, mc.name, "overtime-local", true)
				app.SetFinalizers(nil) // it never reaches a cluster to prune
				hub.createApp(ctx, app)
				hub.expectRefused(ctx, tenantA, app.GetName(), "LocalClusterNotSupported")
			}
		})
	})
})

// soakDetail shows what the soak's changes touch in an Application (hub or spoke), a work
// or a report.
func soakDetail(u *unstructured.Unstructured) string {
	switch u.GetKind() {
	case "ManifestWork":
		var w workv1.ManifestWork
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &w); err != nil {
			return err.Error()
		}
		var conds []string
		for _, c := range w.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s@%d", c.Type, c.Status, c.ObservedGeneration))
		}
		var feedback []string
		for _, m := range w.Status.ResourceStatus.Manifests {
			for _, v := range m.StatusFeedbacks.Values {
				if v.Value.String != nil {
					feedback = append(feedback, v.Name+"="+*v.Value.String)
				}
			}
		}
		return fmt.Sprintf("gen=%d %v %v", w.Generation, conds, feedback)
	case "MulticlusterApplicationSetReport":
		var r appsv1alpha1.MulticlusterApplicationSetReport
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
			return err.Error()
		}
		var rows []string
		for _, c := range r.Statuses.ClusterConditions {
			rows = append(rows, fmt.Sprintf("%s:%s/%s/%s/%s@%s", c.Cluster, c.SyncStatus, c.HealthStatus, strings.Join(c.SyncRevisions, ","),
				c.OperationStatePhase, c.OperationStateStartedAt))
		}
		return fmt.Sprint(rows, " ", r.Statuses.Summary)
	default:
		st, err := argoapp.DecodeStatus(u)
		if err != nil {
			return err.Error()
		}
		_, refresh := u.GetAnnotations()[argoapp.AnnotationRefresh]
		_, op := u.Object["operation"]
		state, _ := appState(u)
		return fmt.Sprintf("gen=%d refresh=%v operation=%v %s op=%s@%s %q resources=%d conditions=%d reconciledAt=%s", u.GetGeneration(), refresh, op, state,
			st.OperationState.Phase, st.OperationState.StartedAt, st.OperationState.Message, len(st.Resources), len(st.Conditions), st.ReconciledAt)
	}
}

// workObject is a typed ManifestWork's identity as unstructured, for objectKey.
func workObject(meta metav1.Object) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetNamespace(meta.GetNamespace())
	u.SetName(meta.GetName())
	u.SetUID(meta.GetUID())
	return u
}
