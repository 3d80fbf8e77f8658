package e2e

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// completeResources and completeNameLength shape the complete-status scenario: 40 pulled
// apps on one cluster whose resource lists together exceed what the ManagedClusterAddOn
// report can carry (clusterreport.MaxBytes): a condition per app there, as an agent of a
// hub without the status slices reports them, would shorten some of them; the status
// slices carry all of them to the hub.
//
// The fleet had 100 ConfigMaps with short names per app (4,000 resources, of which
// the report shortened 10 of 40 lists): run it with -complete-status-resources=100
// -complete-status-name-length=0; Argo CD's sync and deletion of 4,000 resources take
// minutes of a 2-core machine. What overflows the report is bytes, not resources: the
// default, 30 resources per app whose names are 240 characters long (the limit is 253),
// makes as many bytes with 1,200 resources (clusterreport.Encode shortens about 14 of the
// 40 lists) and gives Argo CD a third of the resources to sync and delete. Each app alone
// fits the report by far (about 10 KiB of its 32 KiB per app), so what is cut is the
// cluster's report, as in the issue.
//
// What this scenario proves is the status of the resources Argo CD applies, not how it
// applies and deletes them, so its apps spare a small machine two costs of 1,200
// resources (completeTemplate): they sync with Validate=false, since Argo CD's apply (kubectl's)
// otherwise decodes the managed cluster's whole OpenAPI v3 document of the group for each
// resource, to check that the apiserver supports field validation (two thirds of the
// application-controller's CPU, ten minutes of the suite); and Argo CD deletes their
// resources in the background, since the foreground deletion of its plain finalizer waits
// for the garbage collector to release each of them (two minutes).
var (
	completeResources  = flag.Int("complete-status-resources", 30, "resources per app of the complete-status scenario (the last is a Service, the others ConfigMaps)")
	completeNameLength = flag.Int("complete-status-name-length", 240, "length of each ConfigMap's name in the complete-status scenario; 0 keeps the short names")
	completeTemplate   = fleet.AppTemplate{SyncOptions: []string{"Validate=false"}, Finalizer: argoapp.ResourcesFinalizer + "/background"}
)

var _ = Describe("Complete status at any scale", Ordered, func() {
	const (
		placement = "complete-status-placement"
		path      = "complete-status"
		apps      = 40
	)
	var (
		resources, nameLength int
		hubDyn                dynamic.Interface
		addons                addonclient.Interface
		target                *fleet.ManagedCluster
	)
	appSet := func(i int) string { return fmt.Sprintf("complete-%02d", i) }

	BeforeAll(func(ctx SpecContext) {
		resources, nameLength = *completeResources, *completeNameLength
		hub := newHubClients()
		hubDyn, addons = hub.dyn, hub.addons
		target = theFleet.Clusters[1]
		enableAddonForSpec(ctx, target)
		applyAddonPlacementForSpec(ctx, placement, target)

		// 29 ConfigMaps (no health in Argo CD) with long names and a Service (Healthy) per
		// app.
		var manifests strings.Builder
		for i := range resources - 1 {
			name := fmt.Sprintf("settings-%03d", i)
			if nameLength > len(name) {
				name += "-" + strings.Repeat("x", nameLength-len(name)-1)
			}
			fmt.Fprintf(&manifests, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {index: \"%d\"}\n", name, i)
		}
		manifests.WriteString("---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports: [{port: 80}]\n  selector: {app: web}\n")
		_, err := theFleet.Git.Commit(fmt.Sprintf("complete status: %d resources", resources), map[string]string{path + "/resources.yaml": manifests.String()})
		Expect(err).NotTo(HaveOccurred())

		applier := hub.applier
		for i := range apps {
			Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace,
				fleet.PulledApplicationSetYAML(appSet(i), appSet(i), placement, theFleet.Git.URL(), path, appSet(i), completeTemplate))).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			for i := range apps {
				err := hubDyn.Resource(appSetsGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, appSet(i), metav1.DeleteOptions{})
				Expect(ignoreNotFound(err)).To(Succeed())
			}
			eventually(ctx, func(ctx context.Context) (int, error) {
				list, err := hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).List(ctx, metav1.ListOptions{})
				if err != nil {
					return 0, err
				}
				n := 0
				for _, u := range list.Items {
					if strings.Contains(u.GetName(), "-complete-") {
						n++
					}
				}
				return n, nil
			}).WithTimeout(10*time.Minute).Should(BeZero(), "hub Applications gone once the cluster is clean")
			By("the agent's slices go with the apps")
			eventually(ctx, func(ctx context.Context) (int, error) {
				list, err := hubDyn.Resource(statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)).Namespace(target.Name).List(ctx, metav1.ListOptions{})
				if err != nil {
					return 0, err
				}
				return len(list.Items), nil
			}).Should(BeZero())
		})
	})

	It("shows every resource of every app on the hub Application and in its ApplicationSet's report", func(ctx SpecContext) {
		By(fmt.Sprintf("Argo CD syncs the %d apps on the managed cluster (%d resources: minutes on a small machine)", apps, apps*resources))
		spokeDyn, err := dynamic.NewForConfig(target.Config)
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) (int, error) {
			synced := 0
			for i := range apps {
				u, err := spokeDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, target.Name+"-"+appSet(i), metav1.GetOptions{})
				if err != nil {
					continue
				}
				if st, err := argoapp.DecodeStatus(u); err == nil && st.Sync.Status == "Synced" && st.Health.Status == "Healthy" {
					synced++
				}
			}
			return synced, nil
		}).WithTimeout(20 * time.Minute).WithPolling(5 * time.Second).Should(Equal(apps))

		By(fmt.Sprintf("every hub Application lists its %d resources, each Synced, the Service Healthy", resources))
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			var incomplete []string
			for i := range apps {
				name := target.Name + "-" + appSet(i)
				u, err := hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					incomplete = append(incomplete, name+": "+err.Error())
					continue
				}
				st, err := argoapp.DecodeStatus(u)
				if err != nil {
					return nil, err
				}
				synced, serviceHealthy := 0, false
				for _, r := range st.Resources {
					if r.Status == "Synced" {
						synced++
					}
					if r.Kind == "Service" && r.Health.Status == "Healthy" {
						serviceHealthy = true
					}
				}
				if len(st.Resources) != resources || synced != resources || !serviceHealthy {
					incomplete = append(incomplete, fmt.Sprintf("%s: %d resources, %d Synced, Service healthy %v", name, len(st.Resources), synced, serviceHealthy))
				}
			}
			return incomplete, nil
		}).Should(BeEmpty())

		By("the ManagedClusterAddOn report only sums the apps up, and could not have carried them")
		mca, err := addons.AddonV1beta1().ManagedClusterAddOns(target.Name).Get(ctx, addonName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		report, err := clusterreport.Decode(mca.Status.Conditions)
		Expect(err).NotTo(HaveOccurred())
		Expect(report.Apps).To(BeEmpty(), "the agent wrote a condition per app beside its slices")
		summary := meta.FindStatusCondition(mca.Status.Conditions, clusterreport.ConditionSummary)
		Expect(summary).NotTo(BeNil())
		Expect(summary.Message).To(HaveSuffix("The status of each application is in the ApplicationStatusSlices of this addon in this namespace."))
		inSlices, err := sliceApps(ctx, target.Name)
		Expect(err).NotTo(HaveOccurred())
		var complete []clusterreport.App
		for _, app := range inSlices {
			if strings.Contains(app.Name, "-complete-") {
				complete = append(complete, app)
			}
		}
		Expect(complete).To(HaveLen(apps))
		asConditions, err := clusterreport.Encode(clusterreport.Report{Apps: complete})
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("a condition per app, as an agent of a hub without slices reports them, would shorten %d of %d resource lists\n", asConditions.Cut.ResourceLists, apps)
		Expect(asConditions.Cut.ResourceLists).To(BeNumerically(">", 0))

		By(fmt.Sprintf("each ApplicationSet's report lists the %d resources", resources))
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			var short []string
			for i := range apps {
				u, err := hubDyn.Resource(reportsGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, appSet(i), metav1.GetOptions{})
				if err != nil {
					short = append(short, appSet(i)+": "+err.Error())
					continue
				}
				var r appsv1alpha1.MulticlusterApplicationSetReport
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
					return nil, err
				}
				if len(r.Statuses.Resources) != resources {
					short = append(short, fmt.Sprintf("%s: %d resources", appSet(i), len(r.Statuses.Resources)))
				}
			}
			return short, nil
		}).Should(BeEmpty())
	})
})
