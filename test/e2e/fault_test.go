package e2e

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// A restart of the hub's kube-apiserver, as a control-plane upgrade does: the manager and
// the agents ride it out without restarting, and the pull model works after it.
var _ = Describe("A restart of the hub apiserver", Ordered, func() {
	const (
		appName   = "fault-guestbook"
		appNS     = "guestbook-fault"
		placement = "fault-placement"
	)
	var (
		hub      hubClients
		target   *fleet.ManagedCluster
		spokeDyn dynamic.Interface
		agentPod string
	)
	BeforeAll(func(ctx SpecContext) {
		var err error
		hub = newHubClients()
		// The addon suite leaves the last cluster without the addon while it runs; this
		// suite enables it and removes it again, agent included, before it ends.
		target = theFleet.Clusters[2]
		spokeDyn, err = dynamic.NewForConfig(target.Config)
		Expect(err).NotTo(HaveOccurred())
		agentPod = target.Name + "/" + addon.DefaultInstallNamespace + "/" + addonName + "-agent"

		enableAddonForSpec(ctx, target)
		applyAddonPlacementForSpec(ctx, placement, target)

		// The agent runs and publishes before the restart.
		eventually(ctx, func(ctx context.Context) (string, error) {
			mca, err := hub.addons.AddonV1beta1().ManagedClusterAddOns(target.Name).Get(ctx, addonName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return string(conditionStatus(mca.Status.Conditions, "Available")) + "/" +
				string(conditionStatus(mca.Status.Conditions, clusterreport.ConditionApplicationCRD)), nil
		}).Should(Equal("True/True"))
		Expect(theFleet.PodPids()).To(HaveKey(agentPod))
	})

	It("leaves the manager and the agent running, and the pull model working", func(ctx SpecContext) {
		managerPod, managerPid := hubManagerPod()
		agentPid := theFleet.PodPids()[agentPod]
		apiserverPid := theFleet.Hub.APIServerPid()

		// Objects of the kinds the addon framework watches, deleted while the apiserver is
		// down: the manager's informers learn of the deletions only from their relist after
		// the restart, as tombstones (cache.DeletedFinalStateUnknown) that their event
		// filters must survive. The deletes go straight to etcd and stand in for deletes
		// that another apiserver of an HA hub serves while this one restarts. The objects
		// are of another addon, so that nothing in the fleet depends on them.
		mcas, cmas := hub.addons.AddonV1beta1().ManagedClusterAddOns(target.Name), hub.addons.AddonV1beta1().ClusterManagementAddOns()
		_, err := mcas.Create(ctx, &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: watchGapAddon}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(ignoreNotFound(mcas.Delete(ctx, watchGapAddon, metav1.DeleteOptions{}))).To(Succeed())
		})
		_, err = cmas.Create(ctx, &addonv1beta1.ClusterManagementAddOn{
			ObjectMeta: metav1.ObjectMeta{Name: watchGapAddon},
			Spec:       addonv1beta1.ClusterManagementAddOnSpec{InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(ignoreNotFound(cmas.Delete(ctx, watchGapAddon, metav1.DeleteOptions{}))).To(Succeed())
		})
		// Nothing shows that the manager's informers have them; a watch event reaches an
		// informer in milliseconds.
		time.Sleep(2 * time.Second)

		start := time.Now()
		Expect(theFleet.Hub.RestartAPIServer(ctx, func(ctx context.Context, etcd *clientv3.Client) error {
			return errors.Join(
				deleteStoredObject(ctx, etcd, addonv1beta1.GroupName, "managedclusteraddons", target.Name, watchGapAddon),
				deleteStoredObject(ctx, etcd, addonv1beta1.GroupName, "clustermanagementaddons", "", watchGapAddon))
		})).To(Succeed())
		ready := time.Since(start)
		Expect(theFleet.Hub.APIServerPid()).NotTo(Equal(apiserverPid), "a new kube-apiserver process")
		_, err = mcas.Get(ctx, watchGapAddon, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ManagedClusterAddOn deleted in etcd is gone: %v", err)
		_, err = cmas.Get(ctx, watchGapAddon, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ClusterManagementAddOn deleted in etcd is gone: %v", err)

		By("a pulled Application created after the restart gets its ManifestWork, syncs on the cluster, and its status reaches the hub")
		app := pulledApp(fleet.ArgoCDNamespace, appName, target.Name, appNS, true)
		app.SetFinalizers(nil)
		hubApps := hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace)
		_, err = hubApps.Create(ctx, app, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(ignoreNotFound(hubApps.Delete(ctx, appName, metav1.DeleteOptions{}))).To(Succeed())
			eventually(ctx, objectGone(spokeDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), appName)).Should(BeTrue(), "spoke Application removed with its work")
		})

		// A manager that restarted does nothing until the leader Lease of the one before it
		// expires, minutes later: each wait below stops at once on a restart, and says so.
		sameManager := func() error {
			if pid := theFleet.PodPids()[managerPod]; pid != managerPid {
				return StopTrying(fmt.Sprintf("the manager (pid %d) exited; its pid is now %d (0: none runs): see its log in the fleet's logs/", managerPid, pid))
			}
			return nil
		}
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			if err := sameManager(); err != nil {
				return nil, err
			}
			list, err := hub.works.WorkV1().ManifestWorks(target.Name).List(ctx, metav1.ListOptions{LabelSelector: argoapp.LabelPullToOCMManagedCluster})
			if err != nil {
				return nil, err
			}
			var names []string
			for _, w := range list.Items {
				if w.Annotations[argoapp.AnnotationHubApplicationName] == appName {
					names = append(names, w.Name)
				}
			}
			return names, nil
		}).Should(HaveLen(1), "exactly one work for the app")
		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		syncOf := func(u *unstructured.Unstructured) (string, error) {
			st, err := argoapp.DecodeStatus(u)
			if err != nil {
				return "", err
			}
			return st.Sync.Status + "/" + st.Sync.Revision, nil
		}
		eventually(ctx, func(ctx context.Context) (string, error) {
			if err := sameManager(); err != nil {
				return "", err
			}
			u, err := spokeDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, appName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return syncOf(u)
		}).Should(Equal("Synced/"+head), "synced on %s", target.Name)
		eventually(ctx, func(ctx context.Context) (string, error) {
			if err := sameManager(); err != nil {
				return "", err
			}
			u, err := hubApps.Get(ctx, appName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return syncOf(u)
		}).Should(Equal("Synced/"+head), "the hub Application's status")
		appRecovered := time.Since(start)

		By("the spoke Application's change reaches the agent's report on the hub")
		eventually(ctx, func(ctx context.Context) (string, error) {
			if err := sameManager(); err != nil {
				return "", err
			}
			reported, found, err := reportedApp(ctx, target.Name, appName)
			if !found || err != nil {
				return "not reported", err
			}
			return reported.Sync.Status + "/" + reported.Sync.Revision + "/" + reported.Health.Status, nil
		}).Should(Equal("Synced/" + head + "/Healthy"))
		reportRecovered := time.Since(start)

		By("neither the manager nor the agent restarted")
		after := theFleet.PodPids()
		Expect(after).To(HaveKeyWithValue(managerPod, managerPid), "the manager process")
		Expect(after).To(HaveKeyWithValue(agentPod, agentPid), "the agent process")
		Expect(fleet.ProcessAlive(managerPid) && fleet.ProcessAlive(agentPid)).To(BeTrue())
		Expect(theFleet.Healthy()).To(Succeed(), "no fleet process exited")
		GinkgoWriter.Printf("hub kube-apiserver restarted and ready in %v; after the restart began, the new app's status was on the hub Application in %v and in the agent's report in %v\n",
			ready.Round(100*time.Millisecond), appRecovered.Round(100*time.Millisecond), reportRecovered.Round(100*time.Millisecond))
	})
})

// watchGapAddon names the ManagedClusterAddOn and ClusterManagementAddOn that the hub
// apiserver restart deletes while the apiserver is down.
const watchGapAddon = "e2e-watch-gap"

// deleteStoredObject deletes an object of a custom resource straight from the hub's etcd,
// at the apiserver's default key for it: /registry/<group>/<resource>/[<namespace>/]<name>.
// It fails unless that key is there and is the one deleted, listing the keys it found
// under /registry/<group>/<resource>/ when the layout is not what it expects.
func deleteStoredObject(ctx context.Context, etcd *clientv3.Client, group, resource, namespace, name string) error {
	prefix := "/registry/" + group + "/" + resource + "/"
	key := prefix + path.Join(namespace, name)
	stored, err := etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("list the keys under %s: %w", prefix, err)
	}
	var keys []string
	for _, kv := range stored.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if !slices.Contains(keys, key) {
		return fmt.Errorf("no key %s in etcd; the keys under %s: %q", key, prefix, keys)
	}
	deleted, err := etcd.Delete(ctx, key)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if deleted.Deleted != 1 {
		return fmt.Errorf("delete %s: %d keys deleted, want 1", key, deleted.Deleted)
	}
	return nil
}
