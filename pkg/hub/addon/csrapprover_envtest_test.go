package addon

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"open-cluster-management.io/addon-framework/pkg/addonmanager"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestAgentCSRApprovalOnARealHub: registration agents, impersonated against a real
// apiserver, ask for cluster1's agent certificate; the apiserver records who asked
// (spec.username and groups). The framework's DefaultCSRApprover approves every one of
// those requests (before). With the addon's approver, the real addon framework, started
// as the manager starts it, approves only cluster1's own agent's request, and leaves
// cluster10's and cluster1x's, and cluster1's asking for cluster10's agents' group too
// (which holds cluster10's hub Role), Pending with one Warning Event each on the
// ManagedClusterAddOn.
func TestAgentCSRApprovalOnARealHub(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	g := testenv.NewGomega(t)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	adminAddons := addonclient.NewForConfigOrDie(env.Config)

	createNamespaces(ctx, t, env, "cluster1")
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	mca := createMCA(ctx, t, env, "cluster1", testAddon)
	createCMA(ctx, t, env, testAddon)

	type requester struct{ user, group string }
	var (
		cluster1  = requester{"system:open-cluster-management:cluster1:k7xq2", "system:open-cluster-management:cluster1"}
		cluster10 = requester{"system:open-cluster-management:cluster10:h3k9d", "system:open-cluster-management:cluster10"}
		cluster1x = requester{"system:open-cluster-management:cluster1x:p2m4z", "system:open-cluster-management:cluster1x"}
	)
	// Every registration agent may create CertificateSigningRequests, as OCM's hub lets
	// them for their certificate rotation and their addons'.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test:csr-requester"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests"},
			Verbs: []string{"create", "get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test:csr-requester"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test:csr-requester"},
	}
	for _, r := range []requester{cluster1, cluster10, cluster1x} {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: r.user})
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The apiserver refuses system:masters for this signer, but not another group.
	withCluster10Group := agentX509Request("cluster1")
	withCluster10Group.Subject.Organization = append(withCluster10Group.Subject.Organization, clusterAgentsGroup("cluster10", testAddon))
	cases := []struct {
		name    string
		by      requester
		request x509Request
	}{
		{"addon-cluster1-argocd-pull-genuine", cluster1, agentX509Request("cluster1")},
		{"addon-cluster1-argocd-pull-by-cluster10", cluster10, agentX509Request("cluster1")},
		{"addon-cluster1-argocd-pull-by-cluster1x", cluster1x, agentX509Request("cluster1")},
		{"addon-cluster1-argocd-pull-cluster10-group", cluster1, withCluster10Group},
	}
	forged := cases[1:]
	for _, c := range cases {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: c.by.user,
			Groups: []string{c.by.group, registrationGroupAll}}
		as := kubernetes.NewForConfigOrDie(cfg)
		// As the klusterlet creates it (OCM's register/csr), once the binding above takes
		// effect (the apiserver's RBAC cache follows it within a moment).
		request := pemRequest(t, c.request)
		if err := untilBound(func() error {
			_, err := as.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
				ObjectMeta: metav1.ObjectMeta{Name: c.name,
					Labels: map[string]string{clusterv1.ClusterNameLabelKey: "cluster1", addonv1beta1.AddonLabelKey: testAddon}},
				Spec: certificatesv1.CertificateSigningRequestSpec{Request: request,
					SignerName: certificatesv1.KubeAPIServerClientSignerName, Usages: agentCSRUsages},
			}, metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatalf("%s creates %s: %v", c.by.user, c.name, err)
		}
		stored, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if stored.Spec.Username != c.by.user || !slices.Contains(stored.Spec.Groups, c.by.group) {
			t.Fatalf("%s: the apiserver recorded %s %v, not the impersonated %s", c.name, stored.Spec.Username, stored.Spec.Groups, c.by.user)
		}
		// Before: the framework's default approves it.
		if !utils.DefaultCSRApprover(AgentName)(ctx, cluster, mca, stored) {
			t.Errorf("before: DefaultCSRApprover does not approve %s", c.name)
		}
	}

	// The real framework, with the addon as the manager builds it.
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: admin.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broadcaster.Shutdown)
	a, err := NewAgentAddon(Options{AddonName: testAddon, Settings: Settings{AgentImage: "agent:test", WatchNamespaces: []string{"argocd"}},
		Recorder: broadcaster.NewRecorder(env.Scheme, CSRApproverName)}, admin, adminAddons)
	if err != nil {
		t.Fatal(err)
	}
	framework, err := addonmanager.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.AddAgent(a); err != nil {
		t.Fatal(err)
	}
	frameworkCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	a.Start(frameworkCtx)
	if err := StartFramework(frameworkCtx, env.Config, framework, []string{testAddon}, nil); err != nil {
		t.Fatal(err)
	}

	approval := func(name string) func() string {
		return func() string {
			csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			for _, c := range csr.Status.Conditions {
				return string(c.Type) + "/" + c.Reason
			}
			return "Pending"
		}
	}
	// notApprovedEvents counts the AgentCSRNotApproved Events on the ManagedClusterAddOn
	// by the request they relate to.
	notApprovedEvents := func() map[string]int {
		list, err := admin.EventsV1().Events("cluster1").List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		counts := map[string]int{}
		for _, e := range list.Items {
			if e.Reason == ReasonAgentCSRNotApproved && e.Type == corev1.EventTypeWarning &&
				e.Regarding.Kind == "ManagedClusterAddOn" && e.Regarding.Name == testAddon && e.Related != nil {
				counts[e.Related.Name]++
			}
		}
		return counts
	}
	g.Eventually(approval(cases[0].name)).Should(gomega.Equal("Approved/AutoApprovedByHubCSRApprovingController"))
	want := map[string]int{}
	for _, c := range forged {
		want[c.name] = 1
	}
	states := func() string {
		var out []string
		for _, c := range forged {
			out = append(out, c.name+": "+approval(c.name)())
		}
		return strings.Join(out, ", ")
	}
	g.Eventually(notApprovedEvents).Should(gomega.Equal(want), states)
	list, err := admin.EventsV1().Events("cluster1").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, c := range forged {
		g.Expect(approval(c.name)()).To(gomega.Equal("Pending"), c.name)
		i := slices.IndexFunc(list.Items, func(e eventsv1.Event) bool { return e.Related != nil && e.Related.Name == c.name })
		g.Expect(list.Items[i].Note).To(gomega.SatisfyAll(gomega.ContainSubstring(c.by.user), gomega.ContainSubstring("cluster cluster1")), c.name)
	}

	// The framework checks a pending request again when it changes (and at each resync):
	// still Pending, and no second Event.
	for _, c := range forged {
		csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, c.name, metav1.GetOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		csr.Annotations = map[string]string{"test": "touched"}
		_, err = admin.CertificatesV1().CertificateSigningRequests().Update(ctx, csr, metav1.UpdateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	g.Consistently(func() []string {
		var states []string
		for _, c := range forged {
			states = append(states, approval(c.name)())
		}
		return states
	}).Should(gomega.Equal([]string{"Pending", "Pending", "Pending"}))
	g.Expect(notApprovedEvents()).To(gomega.Equal(want))
}
