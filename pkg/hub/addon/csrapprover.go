package addon

import (
	"context"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

const (
	// CSRApproverName is the reporting controller of the approver's Events.
	CSRApproverName = "argocd-pull-agent-csr"
	// ReasonAgentCSRNotApproved is the reason of the Warning Event on a ManagedClusterAddOn
	// whose agent certificate request the manager leaves for a person to approve or deny.
	ReasonAgentCSRNotApproved = "AgentCSRNotApproved"

	// registrationUserPrefix starts the hub user and group of a klusterlet's registration
	// agent: user system:open-cluster-management:<cluster>:<agent id>, groups
	// system:open-cluster-management:<cluster> and system:open-cluster-management:managed-clusters
	// (OCM's registration/hub/user and register/csr).
	registrationUserPrefix = "system:open-cluster-management:"
	// noteLimit bounds an Event's note, as the events.k8s.io API does.
	noteLimit = 1024
	// reportedCSRs bounds how many refused requests the approver remembers having
	// reported, and reportedFor how long: kube-controller-manager's csrcleaner deletes a
	// pending request after 24 hours.
	reportedCSRs = 1024
	reportedFor  = 25 * time.Hour
)

// agentCSRUsages are the key usages the klusterlet asks for the agent's client
// certificate (OCM's register/csr), all that the kube-apiserver-client signer allows.
var agentCSRUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth,
}

// The attributes of a subject that the agent's request carries: its CommonName and its
// Organizations.
var (
	oidCommonName   = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization = asn1.ObjectIdentifier{2, 5, 4, 10}
)

// agentCSRApprover is the addon framework's CSRApproveCheck for the agent: it approves a
// request only when it is exactly the one the cluster's klusterlet makes for the agent's
// KubeClient registration (agent.KubeClientSignerConfigurations), made by that cluster's
// registration agent. Anything else stays Pending for a person, with a log line and a
// Warning Event on the ManagedClusterAddOn, once per request.
//
// The framework's utils.DefaultCSRApprover (v1.3.0) is not enough: it approves a request
// with a third Organization of the requester's choice, and matches the requester by the
// prefix system:open-cluster-management:<cluster>, which cluster10's registration agent
// matches for cluster1.
type agentCSRApprover struct {
	recorder events.EventRecorder
	// reported holds the UIDs of the requests already reported: the framework checks a
	// pending request again at every resync.
	reported *cache.LRUExpireCache
}

func newAgentCSRApprover(recorder events.EventRecorder) *agentCSRApprover {
	return &agentCSRApprover{recorder: recorder, reported: cache.NewLRUExpireCache(reportedCSRs)}
}

// approve is the agent.CSRApproveFunc: true approves csr for the agent of addon on
// cluster.
func (a *agentCSRApprover) approve(ctx context.Context, cluster *clusterv1.ManagedCluster, addon *addonv1beta1.ManagedClusterAddOn, csr *certificatesv1.CertificateSigningRequest) bool {
	log := ctrl.LoggerFrom(ctx).WithName(CSRApproverName).WithValues("csr", csr.Name, "cluster", cluster.Name, "addon", addon.Name, "requester", csr.Spec.Username)
	problems := agentCSRProblems(cluster.Name, addon.Name, csr)
	if len(problems) == 0 {
		log.Info("approving the agent's certificate request")
		return true
	}
	why := strings.Join(problems, "; ")
	log.Info("agent certificate request not approved: left for a person", "problems", why)
	if a.recorder == nil {
		return false
	}
	if _, done := a.reported.Get(csr.UID); done {
		return false
	}
	a.reported.Add(csr.UID, struct{}{}, reportedFor)
	note := fmt.Sprintf("certificate request %s for the agent of cluster %s, by %q, is not approved automatically: %s; "+
		"`kubectl certificate approve %s` if a person trusts it, else `kubectl certificate deny %s`",
		csr.Name, cluster.Name, csr.Spec.Username, why, csr.Name, csr.Name)
	if len(note) > noteLimit {
		note = note[:noteLimit-3] + "..."
	}
	a.recorder.Eventf(addon, csr, corev1.EventTypeWarning, ReasonAgentCSRNotApproved, "Approve", "%s", note)
	return false
}

// agentCSRProblems returns how csr differs from the request of the agent of addonName on
// cluster, made by the cluster's registration agent; none when it is that request.
func agentCSRProblems(cluster, addonName string, csr *certificatesv1.CertificateSigningRequest) []string {
	var problems []string
	if got := csr.Labels[clusterv1.ClusterNameLabelKey]; got != cluster {
		problems = append(problems, fmt.Sprintf("label %s is %q, not %q", clusterv1.ClusterNameLabelKey, got, cluster))
	}
	if got := csr.Labels[addonv1beta1.AddonLabelKey]; got != addonName {
		problems = append(problems, fmt.Sprintf("label %s is %q, not %q", addonv1beta1.AddonLabelKey, got, addonName))
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		problems = append(problems, fmt.Sprintf("signer is %q, not %q", csr.Spec.SignerName, certificatesv1.KubeAPIServerClientSignerName))
	}
	if !isRegistrationAgent(cluster, csr.Spec.Username) {
		problems = append(problems, fmt.Sprintf("requester %q is not the registration agent of cluster %s (%s%s:<agent id>)",
			csr.Spec.Username, cluster, registrationUserPrefix, cluster))
	}
	if group := registrationUserPrefix + cluster; !slices.Contains(csr.Spec.Groups, group) {
		problems = append(problems, fmt.Sprintf("requester is not in group %s", group))
	}
	if !sameSet(csr.Spec.Usages, agentCSRUsages) {
		problems = append(problems, fmt.Sprintf("usages are %q, not %q", csr.Spec.Usages, agentCSRUsages))
	}
	return append(problems, x509RequestProblems(cluster, addonName, csr.Spec.Request)...)
}

// isRegistrationAgent says whether username is the hub user of a registration agent of
// cluster: system:open-cluster-management:<cluster>:<agent id>, the agent id one segment
// (OCM's hub checks the same form when it renews that agent's certificate). The colon
// after the cluster name keeps cluster10's agent from passing for cluster1's.
func isRegistrationAgent(cluster, username string) bool {
	id, ok := strings.CutPrefix(username, registrationUserPrefix+cluster+":")
	return ok && id != "" && !strings.Contains(id, ":")
}

// x509RequestProblems returns how the PEM x509 certificate request differs from the
// agent's: its subject is the agent's user and groups, nothing else, and its only subject
// alternative name, if any, the DNS name the klusterlet adds.
func x509RequestProblems(cluster, addonName string, request []byte) []string {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return []string{"request is not a PEM CERTIFICATE REQUEST"}
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return []string{fmt.Sprintf("request does not parse: %v", err)}
	}
	var problems []string
	if user := agent.DefaultUser(cluster, addonName, AgentName); req.Subject.CommonName != user {
		problems = append(problems, fmt.Sprintf("CommonName is %q, not %q", req.Subject.CommonName, user))
	}
	if groups := agent.DefaultGroups(cluster, addonName); !sameSet(req.Subject.Organization, groups) {
		problems = append(problems, fmt.Sprintf("Organizations are %q, not %q", req.Subject.Organization, groups))
	}
	for _, name := range req.Subject.Names {
		if !name.Type.Equal(oidCommonName) && !name.Type.Equal(oidOrganization) {
			problems = append(problems, fmt.Sprintf("subject has attribute %s", name.Type))
			break
		}
	}
	if dns := agentDNSName(addonName); len(req.DNSNames) > 1 || len(req.DNSNames) == 1 && req.DNSNames[0] != dns {
		problems = append(problems, fmt.Sprintf("DNS names are %q, not none or %q", req.DNSNames, dns))
	}
	if len(req.IPAddresses) > 0 || len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		problems = append(problems, fmt.Sprintf("subject alternative names: IP addresses %q, emails %q, URIs %q",
			req.IPAddresses, req.EmailAddresses, req.URIs))
	}
	return problems
}

// agentDNSName is the DNS name the klusterlet puts in each addon's certificate request
// (OCM's register/csr NewCSRDriverForAddOn). A client certificate's DNS name grants
// nothing on the apiserver.
func agentDNSName(addonName string) string {
	return addonName + ".addon.open-cluster-management.io"
}

// sameSet says whether got holds each element of want once, and nothing else.
func sameSet[T comparable](got, want []T) bool {
	return len(got) == len(want) && sets.New(got...).Equal(sets.New(want...))
}
