package fleet

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestCertificateAuthorityIssuesVerifiableCertificates(t *testing.T) {
	ca, err := newCertificateAuthority("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(t, ca.CertPEM))

	serving, err := ca.issueServing("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCert(t, serving.CertPEM).Verify(x509.VerifyOptions{
		Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		t.Errorf("serving certificate does not verify for 127.0.0.1: %v", err)
	}

	client, err := ca.issueClient("alice", "system:masters", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, client.CertPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	orgs := append([]string(nil), cert.Subject.Organization...)
	sort.Strings(orgs)
	if cert.Subject.CommonName != "alice" || strings.Join(orgs, ",") != "system:masters,team-a" {
		t.Errorf("client subject = %v, want CN alice, O system:masters,team-a", cert.Subject)
	}

	other, err := newCertificateAuthority("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.issueClient("mallory")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCert(t, foreign.CertPEM).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a certificate of another CA verified")
	}
}

func TestDecodeYAML(t *testing.T) {
	objs, err := DecodeYAML([]byte(`
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Secret, metadata: {name: b}}
- {apiVersion: v1, kind: Service, metadata: {name: c}}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if want := "ConfigMap/a,Secret/b,Service/c"; strings.Join(got, ",") != want {
		t.Errorf("decoded %v, want %s", got, want)
	}
	if _, err := DecodeYAML([]byte("kind: [unclosed")); err == nil {
		t.Error("malformed YAML decoded without error")
	}
}

func TestHubCRDsPointAddonConversionAtTheWebhookProcess(t *testing.T) {
	dir := t.TempDir()
	templated := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: managedclusteraddons.addon.open-cluster-management.io
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        caBundle: {{ .AddonAPIServiceCABundle }}
        service:
          name: cluster-manager-addon-webhook
          namespace: {{ .ClusterManagerNamespace }}
          path: /convert
          port: 9443
      conversionReviewVersions: [v1, v1beta1]
  group: addon.open-cluster-management.io
`
	plain := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: manifestworks.work.open-cluster-management.io}\nspec: {group: work.open-cluster-management.io}\n"
	for name, data := range map[string]string{"0000_01_addon.yaml": templated, "0000_00_work.yaml": plain, "notes.txt": "not a manifest"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	crds, err := hubCRDs(dir, "https://127.0.0.1:9999/convert", []byte("CA PEM"))
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 2 || crds[0].GetName() != "manifestworks.work.open-cluster-management.io" {
		t.Fatalf("got %d CRDs (first %q), want the two YAML files in name order", len(crds), crds[0].GetName())
	}
	cc, _, _ := unstructured.NestedMap(crds[1].Object, "spec", "conversion", "webhook", "clientConfig")
	want := map[string]any{"url": "https://127.0.0.1:9999/convert", "caBundle": base64.StdEncoding.EncodeToString([]byte("CA PEM"))}
	if len(cc) != 2 || cc["url"] != want["url"] || cc["caBundle"] != want["caBundle"] {
		t.Errorf("clientConfig = %v, want only %v", cc, want)
	}
	if _, found, _ := unstructured.NestedMap(crds[0].Object, "spec", "conversion"); found {
		t.Error("a CRD without a template got a conversion webhook")
	}
}

func TestSupervisorStopLeavesNoProcessBehind(t *testing.T) {
	sup := &supervisor{dir: t.TempDir()}
	pidFile := filepath.Join(sup.dir, "grandchild.pid")
	// A child that ignores SIGTERM and has a grandchild: stop must still end both.
	p, err := sup.start(processSpec{Name: "stubborn", Path: "/bin/sh", Args: []string{"-c",
		"trap '' TERM; sleep 300 & echo $! > " + pidFile + "; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	deadline := time.Now().Add(10 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		data, _ := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		time.Sleep(20 * time.Millisecond)
	}
	if grandchild == 0 {
		t.Fatal("the child never started its grandchild")
	}
	if got := sup.pids(); len(got) != 1 || got[0] != p.Pid() {
		t.Errorf("pids = %v, want [%d]", got, p.Pid())
	}
	sup.stopAll(500 * time.Millisecond)
	if exited, _ := p.Exited(); !exited {
		t.Error("the child still runs after stopAll")
	}
	deadline = time.Now().Add(5 * time.Second)
	for ProcessAlive(grandchild) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if ProcessAlive(grandchild) {
		t.Errorf("grandchild %d outlived stopAll", grandchild)
	}
	if len(sup.pids()) != 0 {
		t.Error("stopAll left processes in the list")
	}
}

func TestSupervisorReportsAnExitedProcess(t *testing.T) {
	sup := &supervisor{dir: t.TempDir()}
	p, err := sup.start(processSpec{Name: "crasher", Path: "/bin/sh", Args: []string{"-c", "echo boom; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	err = sup.failed()
	if err == nil || !strings.Contains(err.Error(), "crasher exited") || !strings.Contains(err.Error(), "crasher.log") {
		t.Fatalf("failed() = %v, want it to name crasher and its log", err)
	}
	log, _ := os.ReadFile(sup.logPath("crasher"))
	if !strings.Contains(string(log), "boom") {
		t.Errorf("log %q lacks the process output", log)
	}
}

func TestEnvValueResolvesResourceFieldRef(t *testing.T) {
	c := corev1.Container{Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}}
	for _, tc := range []struct {
		env  corev1.EnvVar
		want string
	}{
		{corev1.EnvVar{Name: "PLAIN", Value: "x"}, "x"},
		{corev1.EnvVar{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}, "536870912"},
		{corev1.EnvVar{Name: "MIB", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}}, "512"},
		{corev1.EnvVar{Name: "NOLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}, ""},
	} {
		got, err := ContainerEnvValue(c, tc.env)
		if err != nil || got != tc.want {
			t.Errorf("ContainerEnvValue(%s) = %q, %v; want %q", tc.env.Name, got, err, tc.want)
		}
	}
	if _, err := ContainerEnvValue(c, corev1.EnvVar{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{}}}); err == nil {
		t.Error("ContainerEnvValue accepted a secretKeyRef the fleet cannot resolve")
	}
}

func TestSetPodStatusReportsTheProcessAsAKubeletWould(t *testing.T) {
	now := metav1.Now()
	bound := func() *corev1.Pod {
		return &corev1.Pod{
			Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			}},
		}
	}
	pod := bound()
	if !setPodStatus(pod, true, now) {
		t.Fatal("a Pending pod whose process runs was not changed")
	}
	if pod.Status.Phase != corev1.PodRunning || podCondition(pod, corev1.PodReady) != corev1.ConditionTrue ||
		podCondition(pod, corev1.ContainersReady) != corev1.ConditionTrue || podCondition(pod, corev1.PodScheduled) != corev1.ConditionTrue {
		t.Errorf("running: phase %s, conditions %v; want Running, Ready, and PodScheduled kept", pod.Status.Phase, pod.Status.Conditions)
	}
	if len(pod.Status.ContainerStatuses) != 1 || !pod.Status.ContainerStatuses[0].Ready || pod.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("container statuses %v, want agent ready and running", pod.Status.ContainerStatuses)
	}
	if setPodStatus(pod, true, now) {
		t.Error("a Running, Ready pod was changed again: a write with no change")
	}

	if !setPodStatus(pod, false, now) {
		t.Fatal("a Ready pod whose process exited was not changed")
	}
	if pod.Status.Phase != corev1.PodPending || podCondition(pod, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("exited: phase %s, conditions %v; want Pending, not Ready", pod.Status.Phase, pod.Status.Conditions)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Message != "containers with unready status: [agent]" {
			t.Errorf("Ready message %q, want the kubelet's", c.Message)
		}
	}
	if n := len(pod.Status.Conditions); n != 4 {
		t.Errorf("%d conditions, want Initialized, ContainersReady, Ready and PodScheduled once each: %v", n, pod.Status.Conditions)
	}
}

func TestStartFailureStopsWhatStartedAndReturnsTheError(t *testing.T) {
	// No binaries: the first process fails to start, in every control plane.
	f, err := Start(context.Background(), Options{Dir: t.TempDir(), BinDir: t.TempDir(), Clusters: []string{"c1"}})
	if err == nil || f != nil {
		t.Fatalf("Start = %v, %v; want no fleet and an error", f, err)
	}
	if !strings.Contains(err.Error(), "etcd") {
		t.Errorf("error %q does not name what failed to start", err)
	}
}
