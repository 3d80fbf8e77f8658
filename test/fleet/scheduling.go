package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
)

// What runs Pods on a managed cluster: kube-scheduler binds them to Nodes, and KWOK
// (sigs.k8s.io/kwok) plays the kubelet of a few fake Nodes: it keeps the Nodes Ready and
// their leases fresh, and moves each Pod bound to them through its lifecycle (Running and
// Ready, Succeeded for a Job's, gone once deleted) by the stages of kwokConfig.

// KWOKNodes is how many fake Nodes each managed cluster has.
const KWOKNodes = 3

// FailingImageMarker: a Pod with a container whose image contains it runs but never becomes
// Ready, as a Pod whose readiness probe keeps failing. A Deployment of such Pods never
// becomes Available, so an Argo CD app made of it is not Healthy.
const FailingImageMarker = "fail"

// ReadyAfterAnnotation on a Pod (template) sets how long it takes to become Ready once
// bound, as a duration ("20s"), in place of the default of one to two seconds: an image
// pull and a readiness probe that take their time.
const ReadyAfterAnnotation = "pod-ready.stage.kwok.x-k8s.io/delay"

const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kubeSystem         = "kube-system"
	kwokServiceAccount = "kwok-controller"
)

// kwokConfig configures the kwok process: the Nodes it manages, and the stages, adapted
// from kwok's own "fast" node and pod stages (kustomize/stage in the module), that say what
// it does with them.
//
// Pods of the addon (labelled app.kubernetes.io/part-of=<addon>) are not started by KWOK:
// the fleet runs their Deployments as processes (pods.go), and that pod runner is what
// says whether they run. KWOK still completes their deletion, as a kubelet would.
var kwokConfig = fmt.Sprintf(`
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageNodesWithAnnotationSelector: %[1]s=fake
  cidr: 10.244.0.0/16
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: 2
  podPlayStageParallelism: 2
  nodePlayStageParallelism: 2
  podsOnNodeSyncParallelism: 2
  enablePodsOnNodeSyncStreamWatch: true
  # The kubelet API's container logs (startWorkloads, kwokClusterLogs).
  enableDebuggingHandlers: true
`+kwokStage("node-initialize", "Node")+`    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ['True']
  next:
    statusTemplate: |
`+kwokNodeConditions+`      addresses:
      {{ with .status.addresses }}
      {{ YAML . 1 }}
      {{ else }}
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ NodeName | Quote }}
        type: Hostname
      {{ end }}
      allocatable:
      {{ YAML .status.allocatable 1 }}
      capacity:
      {{ YAML .status.capacity 1 }}
      {{ $kwokVersion := printf "kwok-%%s" Version }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        containerRuntimeVersion: {{ $kwokVersion }}
        kernelVersion: {{ $kwokVersion }}
        kubeProxyVersion: {{ $kwokVersion }}
        kubeletVersion: {{ $kwokVersion }}
      phase: Running
      {{ with NodePort }}
      daemonEndpoints:
        kubeletEndpoint:
          Port: {{ . }}
      {{ end }}
`+kwokStage("node-heartbeat-with-lease", "Node")+`    - key: '.status.phase'
      operator: In
      values: [Running]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ['True']
  delay:
    durationMilliseconds: 600000
    jitterDurationMilliseconds: 610000
  next:
    statusTemplate: |
`+kwokNodeConditions+kwokStage("pod-ready", "Pod")+kwokPendingPod+`    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ['True']
`+kwokNotAddonPod+`    - key: '.spec.containers.[].image | contains("%[3]s")'
      operator: NotIn
      values: ['true']
  delay:
    durationMilliseconds: 1000
    jitterDurationMilliseconds: 2000
    durationFrom:
      jq: {expression: '.metadata.annotations["%[4]s"]'}
    jitterDurationFrom:
      jq: {expression: '.metadata.annotations["%[4]s"]'}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
`+kwokRunningContainers("true")+`      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
`+kwokCompletedContainer+kwokRunningPod+kwokStage("pod-running-not-ready", "Pod")+kwokPendingPod+kwokNotAddonPod+`    - key: '.spec.containers.[].image | contains("%[3]s")'
      operator: In
      values: ['true']
  delay:
    durationMilliseconds: 1000
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $unready := list }}
      {{ range .spec.containers }}{{ $unready = append $unready .name }}{{ end }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: Ready
        reason: ContainersNotReady
        message: {{ printf "containers with unready status: %%v" $unready | Quote }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: ContainersReady
        reason: ContainersNotReady
        message: {{ printf "containers with unready status: %%v" $unready | Quote }}
`+kwokRunningContainers("false")+kwokRunningPod+kwokStage("pod-complete", "Pod")+`    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: [Running]
    - key: '.metadata.ownerReferences.[].kind'
      operator: In
      values: [Job]
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
`+kwokCompletedContainer+`      phase: Succeeded
`+kwokStage("pod-delete", "Pod")+`    - key: '.metadata.deletionTimestamp'
      operator: Exists
  next:
    delete: true
`, kwokNodeAnnotation, clusterreport.DefaultAddonName, FailingImageMarker, ReadyAfterAnnotation)

// kwokStage starts the KWOK Stage name of the objects of kind (Node, Pod), up to the
// expressions of its selector.
func kwokStage(name, kind string) string {
	return `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: ` + name + `}
spec:
  resourceRef: {apiGroup: v1, kind: ` + kind + `}
  selector:
    matchExpressions:
`
}

// The pieces of kwokConfig that its stages share.
const (
	// kwokNodeConditions is the status template of a Node's conditions, all fresh.
	kwokNodeConditions = `      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
`
	// kwokPendingPod selects a Pod not deleted and still Pending.
	kwokPendingPod = `    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: [Pending]
`
	// kwokNotAddonPod selects a Pod that is not the addon's (%[2]s of kwokConfig).
	kwokNotAddonPod = `    - key: '.metadata.labels["app.kubernetes.io/part-of"]'
      operator: NotIn
      values: [%[2]s]
`
	// kwokCompletedContainer ends a container status of the template with a completed
	// run.
	kwokCompletedContainer = `        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
`
	// kwokRunningPod ends the status template of a running Pod.
	kwokRunningPod = `      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
`
)

// kwokRunningContainers is the status template of a Pod's containers, running, and ready
// ("true") or not ("false").
func kwokRunningContainers(ready string) string {
	return `      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: ` + ready + `
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
`
}

// startWorkloads runs what makes Pods run on the cluster: kube-scheduler as
// system:kube-scheduler, and KWOK, as its own service account with the RBAC of its
// kustomize/rbac, managing KWOKNodes fake Nodes. It returns once every Node is Ready.
// kube-controller-manager's workload controllers (deployment, replicaset, ...) run already.
func startWorkloads(ctx context.Context, sup *supervisor, bin string, cp *ControlPlane, kwokDir string) error {
	schedulerKC := filepath.Join(cp.pkiDir, "kube-scheduler.kubeconfig")
	if err := cp.writeClientKubeconfig(schedulerKC, "system:kube-scheduler"); err != nil {
		return err
	}
	if _, err := sup.start(processSpec{Name: cp.Name + "-kube-scheduler", Path: filepath.Join(bin, "kube-scheduler"), Args: []string{
		"--kubeconfig=" + schedulerKC,
		"--leader-elect=false", "--secure-port=0",
		"--v=1",
	}}); err != nil {
		return err
	}

	applier, err := NewApplier(cp.Config)
	if err != nil {
		return err
	}
	rbac := filepath.Join(kwokDir, "kustomize/rbac")
	if err := applier.ApplyFiles(ctx, kubeSystem, filepath.Join(rbac, "service_account.yaml"), filepath.Join(rbac, "role.yaml"),
		filepath.Join(rbac, "role_binding.yaml"), filepath.Join(rbac, "flow_schema.yaml")); err != nil {
		return fmt.Errorf("KWOK RBAC: %w", err)
	}
	dir := filepath.Join(cp.Dir, "kwok")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	kc := filepath.Join(dir, "kwok-controller.kubeconfig")
	if err := cp.ServiceAccountKubeconfig(ctx, kubeSystem, kwokServiceAccount, kc, tokenTTL); err != nil {
		return err
	}
	// KWOK plays the kubelet's API too, for the apiserver's Pod logs: on a free loopback
	// port, which the Nodes advertise (InternalIP 127.0.0.1, their kubelet endpoint), with
	// a serving certificate of the cluster CA; every container's log is podLogLines.
	serving, err := cp.ca.issueServing("kwok")
	if err != nil {
		return err
	}
	logsFile := filepath.Join(dir, "container.log")
	if err := writeFiles(dir, map[string][]byte{"kubelet.crt": serving.CertPEM, "kubelet.key": serving.KeyPEM,
		"container.log": []byte(podLogLines)}); err != nil {
		return err
	}
	ports, err := loopback.FreePorts(1)
	if err != nil {
		return err
	}
	config := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(config, []byte(kwokConfig+fmt.Sprintf(kwokClusterLogs, logsFile)), 0o600); err != nil {
		return err
	}
	// HOME keeps kwok from reading a ~/.kwok/kwok.yaml of the user.
	if _, err := sup.start(processSpec{Name: cp.Name + "-kwok", Path: filepath.Join(bin, "kwok"),
		Env: []string{"HOME=" + dir},
		Args: []string{"--kubeconfig=" + kc, "--config=" + config,
			"--server-address=127.0.0.1:" + strconv.Itoa(ports[0]), "--node-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + filepath.Join(dir, "kubelet.crt"), "--tls-private-key-file=" + filepath.Join(dir, "kubelet.key")},
	}); err != nil {
		return err
	}
	for i := range KWOKNodes {
		if _, err := cp.Kube.CoreV1().Nodes().Create(ctx, kwokNode(i), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node: %w", err)
		}
	}
	return waitNodesReady(ctx, sup, cp)
}

// PodLogLine is in the log of every container of a managed cluster's Pods, as KWOK serves
// it (kwokClusterLogs); podLogLines is the log, in the CRI format KWOK reads.
const PodLogLine = "guestbook-ui: listening on :80"

var podLogLines = "2026-01-01T00:00:00.000000000Z stdout F " + PodLogLine + "\n" +
	"2026-01-01T00:00:01.000000000Z stdout F guestbook-ui: ready\n"

// kwokClusterLogs gives every container of every Pod the log file %s, followed.
const kwokClusterLogs = `
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata: {name: every-container}
spec:
  selector: {}
  logs:
  - containers: []
    logsFile: %s
    follow: true
`

// kwokNode is the i-th fake Node, as a kubelet would register it.
func kwokNode(i int) *corev1.Node {
	name := "kwok-node-" + strconv.Itoa(i)
	resources := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"type": "kwok"},
		},
		Status: corev1.NodeStatus{
			Allocatable: resources, Capacity: resources,
			Addresses: []corev1.NodeAddress{
				// KWOK serves every Node's kubelet API on loopback.
				{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
}

func waitNodesReady(ctx context.Context, sup *supervisor, cp *ControlPlane) error {
	var ready int
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := sup.failed(); err != nil {
			return false, err
		}
		nodes, err := cp.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready = 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == KWOKNodes, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %d of %d KWOK nodes Ready: %w", cp.Name, ready, KWOKNodes, err)
	}
	return nil
}

// writeClientKubeconfig writes a kubeconfig with a client certificate for user, signed by
// the cluster CA: the identity of a control-plane component, as kubeadm gives it.
func (cp *ControlPlane) writeClientKubeconfig(path, user string, groups ...string) error {
	kp, err := cp.ca.issueClient(user, groups...)
	if err != nil {
		return err
	}
	return writeKubeconfig(path, cp.URL, cp.ca.CertPEM, clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM})
}
