package addon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	operatorv1 "open-cluster-management.io/api/operator/v1"
)

const (
	testAddon = "argocd-pull"
	// registrationGroupAll is the group every klusterlet's registration agent is in.
	registrationGroupAll = "system:open-cluster-management:managed-clusters"
)

// x509Request is what an agent's PEM certificate request holds.
type x509Request struct {
	Subject pkix.Name
	DNS     []string
	IPs     []net.IP
	Emails  []string
	URIs    []*url.URL
}

// agentX509Request is the request the klusterlet of cluster makes for the agent: the
// agent's user and groups, and the addon's DNS name (OCM's register/csr).
func agentX509Request(cluster string) x509Request {
	return x509Request{
		Subject: pkix.Name{CommonName: agent.DefaultUser(cluster, testAddon, AgentName), Organization: agent.DefaultGroups(cluster, testAddon)},
		DNS:     []string{agentDNSName(testAddon)},
	}
}

// pemRequest returns r as a PEM certificate request, signed by a new key.
func pemRequest(t testing.TB, r x509Request) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: r.Subject, DNSNames: r.DNS, IPAddresses: r.IPs, EmailAddresses: r.Emails, URIs: r.URIs,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// registrationAgent is the hub user and groups of a klusterlet's registration agent
// (OCM's register/csr: user system:open-cluster-management:<cluster>:<agent id>), as the
// apiserver records them in a CertificateSigningRequest it creates.
func registrationAgent(cluster, id string) (string, []string) {
	return "system:open-cluster-management:" + cluster + ":" + id,
		[]string{"system:open-cluster-management:" + cluster, registrationGroupAll, "system:authenticated"}
}

// agentCSR is the CertificateSigningRequest the klusterlet of cluster creates for the
// agent, holding request.
func agentCSR(cluster string, request []byte) *certificatesv1.CertificateSigningRequest {
	user, groups := registrationAgent(cluster, "k7xq2")
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: "addon-" + cluster + "-" + testAddon + "-abcde", UID: types.UID("uid-" + cluster),
			Labels: map[string]string{clusterv1.ClusterNameLabelKey: cluster, addonv1beta1.AddonLabelKey: testAddon},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request, SignerName: certificatesv1.KubeAPIServerClientSignerName, Usages: agentCSRUsages,
			Username: user, Groups: groups,
		},
	}
}

func clusterAndAddon(cluster string) (*clusterv1.ManagedCluster, *addonv1beta1.ManagedClusterAddOn) {
	return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}},
		&addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: testAddon, Namespace: cluster}}
}

// TestAgentCSRApprover: the approver approves the agent's request made by its own
// cluster's registration agent, and nothing wider or anyone else's. Each forged request
// that the framework's DefaultCSRApprover (v1.3.0) approved says so (before), so that the
// test fails if the manager goes back to it.
func TestAgentCSRApprover(t *testing.T) {
	withRequest := func(change func(r *x509Request)) func(t *testing.T, csr *certificatesv1.CertificateSigningRequest) {
		return func(t *testing.T, csr *certificatesv1.CertificateSigningRequest) {
			r := agentX509Request("cluster1")
			change(&r)
			csr.Spec.Request = pemRequest(t, r)
		}
	}
	requestedBy := func(cluster, id string) func(t *testing.T, csr *certificatesv1.CertificateSigningRequest) {
		return func(t *testing.T, csr *certificatesv1.CertificateSigningRequest) {
			csr.Spec.Username, csr.Spec.Groups = registrationAgent(cluster, id)
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T, csr *certificatesv1.CertificateSigningRequest)
		// problem is a part of the refusal's reason; empty: approved.
		problem string
		// defaultApproves: utils.DefaultCSRApprover approves it.
		defaultApproves bool
	}{
		{name: "the genuine request", change: func(*testing.T, *certificatesv1.CertificateSigningRequest) {}, defaultApproves: true},
		{name: "the genuine request, without the DNS name",
			change: withRequest(func(r *x509Request) { r.DNS = nil }), defaultApproves: true},
		{name: "the genuine request, the organizations in another order",
			change: withRequest(func(r *x509Request) {
				r.Subject.Organization = []string{r.Subject.Organization[1], r.Subject.Organization[0]}
			}), defaultApproves: true},

		{name: "an extra organization: cluster10's agents' group",
			change: withRequest(func(r *x509Request) {
				r.Subject.Organization = append(r.Subject.Organization, clusterAgentsGroup("cluster10", testAddon))
			}), problem: "Organizations are", defaultApproves: true},
		// The apiserver refuses to create this one (CertificateSubjectRestriction).
		{name: "an extra organization: system:masters",
			change: withRequest(func(r *x509Request) {
				r.Subject.Organization = append(r.Subject.Organization, "system:masters")
			}), problem: "Organizations are", defaultApproves: true},
		{name: "an organization missing",
			change:  withRequest(func(r *x509Request) { r.Subject.Organization = r.Subject.Organization[:1] }),
			problem: "Organizations are"},
		{name: "an organization twice",
			change: withRequest(func(r *x509Request) {
				r.Subject.Organization = append(r.Subject.Organization, r.Subject.Organization[0])
			}), problem: "Organizations are", defaultApproves: true},
		{name: "another agent's CommonName",
			change: withRequest(func(r *x509Request) {
				r.Subject.CommonName = agent.DefaultUser("cluster1", testAddon, "other")
			}), problem: "CommonName is"},
		{name: "cluster10's agent's certificate",
			change:  withRequest(func(r *x509Request) { *r = agentX509Request("cluster10") }),
			problem: "CommonName is"},
		{name: "an organizational unit",
			change:  withRequest(func(r *x509Request) { r.Subject.OrganizationalUnit = []string{"ops"} }),
			problem: "subject has attribute", defaultApproves: true},
		{name: "another DNS name",
			change:  withRequest(func(r *x509Request) { r.DNS = []string{"kubernetes.default.svc"} }),
			problem: "DNS names are", defaultApproves: true},
		{name: "a second DNS name",
			change:  withRequest(func(r *x509Request) { r.DNS = append(r.DNS, "kubernetes.default.svc") }),
			problem: "DNS names are", defaultApproves: true},
		{name: "an IP address",
			change:  withRequest(func(r *x509Request) { r.IPs = []net.IP{net.ParseIP("10.0.0.1")} }),
			problem: "subject alternative names", defaultApproves: true},
		{name: "an email address",
			change:  withRequest(func(r *x509Request) { r.Emails = []string{"admin@example.com"} }),
			problem: "subject alternative names", defaultApproves: true},
		{name: "a URI",
			change:  withRequest(func(r *x509Request) { r.URIs = []*url.URL{{Scheme: "spiffe", Host: "hub", Path: "/admin"}} }),
			problem: "subject alternative names", defaultApproves: true},
		{name: "not a certificate request",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.Request = []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
			}, problem: "not a PEM CERTIFICATE REQUEST"},

		{name: "requested by cluster10's registration agent",
			change: requestedBy("cluster10", "h3k9d"), problem: "is not the registration agent of cluster cluster1", defaultApproves: true},
		{name: "requested by cluster1x's registration agent: the cluster name not delimited",
			change: requestedBy("cluster1x", "p2m4z"), problem: "is not the registration agent of cluster cluster1", defaultApproves: true},
		{name: "requested by a user of cluster1 with two segments after the cluster",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.Username = "system:open-cluster-management:cluster1:addon:other"
			}, problem: "is not the registration agent of cluster cluster1", defaultApproves: true},
		{name: "requested by the cluster's registration user without its group",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.Groups = []string{registrationGroupAll, "system:authenticated"}
			}, problem: "requester is not in group system:open-cluster-management:cluster1", defaultApproves: true},
		{name: "requested by the cluster's agent itself",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.Username = agent.DefaultUser("cluster1", testAddon, AgentName)
				csr.Spec.Groups = append(agent.DefaultGroups("cluster1", testAddon), "system:authenticated")
			}, problem: "is not the registration agent"},
		{name: "requested through OCM's gRPC server",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.Username = "system:serviceaccount:open-cluster-management-hub:grpc-server-sa"
				csr.Annotations = map[string]string{operatorv1.CSRUsernameAnnotation: "system:open-cluster-management:cluster1:k7xq2"}
			}, problem: "is not the registration agent", defaultApproves: true},

		{name: "another signer",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
			}, problem: "signer is", defaultApproves: true},
		{name: "server auth usage",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.Usages = append(csr.Spec.Usages, certificatesv1.UsageServerAuth)
			}, problem: "usages are", defaultApproves: true},
		{name: "no client auth usage",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Spec.Usages = csr.Spec.Usages[:2]
			}, problem: "usages are", defaultApproves: true},
		{name: "the cluster label of cluster10",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Labels[clusterv1.ClusterNameLabelKey] = "cluster10"
			}, problem: "label " + clusterv1.ClusterNameLabelKey, defaultApproves: true},
		{name: "the addon label of another addon",
			change: func(_ *testing.T, csr *certificatesv1.CertificateSigningRequest) {
				csr.Labels[addonv1beta1.AddonLabelKey] = "other"
			}, problem: "label " + addonv1beta1.AddonLabelKey, defaultApproves: true},
	}
	a, err := NewAgentAddon(Options{AddonName: testAddon, Settings: Settings{AgentImage: "agent:test", WatchNamespaces: []string{"argocd"}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The check the framework calls.
	approve := a.GetAgentAddonOptions().Registration.CSRApproveCheck
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			csr := agentCSR("cluster1", pemRequest(t, agentX509Request("cluster1")))
			c.change(t, csr)
			cluster, addon := clusterAndAddon("cluster1")

			problems := agentCSRProblems(cluster.Name, addon.Name, csr)
			why := strings.Join(problems, "; ")
			if c.problem == "" && len(problems) > 0 {
				t.Errorf("refused: %s", why)
			}
			if c.problem != "" && !strings.Contains(why, c.problem) {
				t.Errorf("want a refusal naming %q, got %q", c.problem, why)
			}
			if got, want := approve(context.Background(), cluster, addon, csr), c.problem == ""; got != want {
				t.Errorf("approve = %t, want %t", got, want)
			}
			if got := utils.DefaultCSRApprover(AgentName)(context.Background(), cluster, addon, csr); got != c.defaultApproves {
				t.Errorf("before: DefaultCSRApprover approves = %t, want %t", got, c.defaultApproves)
			}
		})
	}
}

// TestAgentCSRApproverRecordsOneEventPerRequest: a refused request gets one Warning Event
// that names the cluster, the requester and what is wrong, however often the framework
// checks it again; an approved one gets none.
func TestAgentCSRApproverRecordsOneEventPerRequest(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	approver := newAgentCSRApprover(recorder)
	ctx := context.Background()
	cluster, addon := clusterAndAddon("cluster1")

	genuine := agentCSR("cluster1", pemRequest(t, agentX509Request("cluster1")))
	forged := agentCSR("cluster1", pemRequest(t, agentX509Request("cluster1")))
	forged.Name, forged.UID = "addon-cluster1-argocd-pull-forged", "uid-forged"
	forged.Spec.Username, forged.Spec.Groups = registrationAgent("cluster10", "h3k9d")
	for range 3 {
		if !approver.approve(ctx, cluster, addon, genuine) {
			t.Fatal("the genuine request is refused")
		}
		if approver.approve(ctx, cluster, addon, forged) {
			t.Fatal("the forged request is approved")
		}
	}
	var got []string
	for len(recorder.Events) > 0 {
		got = append(got, <-recorder.Events)
	}
	if len(got) != 1 {
		t.Fatalf("want one Event, got %q", got)
	}
	for _, word := range []string{"Warning", ReasonAgentCSRNotApproved, forged.Name, "cluster cluster1",
		"system:open-cluster-management:cluster10:h3k9d", "is not the registration agent", "kubectl certificate approve"} {
		if !strings.Contains(got[0], word) {
			t.Errorf("the Event %q does not name %q", got[0], word)
		}
	}
}
