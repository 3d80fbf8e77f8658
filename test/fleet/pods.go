package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podRunner stands in for the kubelet of one cluster: it runs, as processes, the
// Deployments that carry a label it is told to run. Each runs with what a kubelet would
// give its Pod: a token of its service account (as $KUBECONFIG, since there is no
// in-cluster mount), its secret volumes as files, its env and args. The image decides
// nothing: the container's command names a binary in the fleet's bin directory.
type podRunner struct {
	cp       *ControlPlane
	sup      *supervisor
	bin      string
	selector string // label selector of the Deployments to run
	// jobSelector, when set, is the label selector of the Jobs to run (reconcileJobs).
	jobSelector string
	// kubelet: the cluster runs Pods (startWorkloads), and this runner reports the status
	// of the Pods of its Deployments, which KWOK leaves alone.
	kubelet bool
	// services maps the addresses of Services that the Deployments name in their
	// arguments to where the fleet runs them, as a cluster's DNS would.
	services map[string]string

	mu   sync.Mutex
	pods map[string]*runningPod // namespace/name -> pod
}

type runningPod struct {
	proc *process
	spec string // hash of what the process was started from
}

// run reconciles every second until ctx ends, then stops the pods it started.
func (r *podRunner) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if err := r.reconcile(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "fleet: pods on %s: %v\n", r.cp.Name, err)
		}
		select {
		case <-ctx.Done():
			r.stopAll()
			return
		case <-tick.C:
		}
	}
}

func (r *podRunner) reconcile(ctx context.Context) error {
	deploys, err := r.cp.Kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: r.selector})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for i := range deploys.Items {
		d := &deploys.Items[i]
		key := d.Namespace + "/" + d.Name
		if d.DeletionTimestamp != nil || (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
			continue
		}
		want[key] = true
		if err := r.ensure(ctx, key, d); err != nil {
			fmt.Fprintf(os.Stderr, "fleet: pod %s on %s: %v\n", key, r.cp.Name, err)
		}
		if r.kubelet {
			if err := r.reportPods(ctx, key, d); err != nil {
				fmt.Fprintf(os.Stderr, "fleet: status of the pods of %s on %s: %v\n", key, r.cp.Name, err)
			}
		}
	}
	if r.jobSelector != "" {
		if err := r.reconcileJobs(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "fleet: jobs on %s: %v\n", r.cp.Name, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, pod := range r.pods {
		if !want[key] && !strings.HasPrefix(key, "job/") {
			r.sup.remove(pod.proc, 10*time.Second)
			delete(r.pods, key)
		}
	}
	return nil
}

// ensure starts the Deployment's process, or restarts it when it exited or when its spec
// or mounted secrets changed.
func (r *podRunner) ensure(ctx context.Context, key string, d *appsv1.Deployment) error {
	pc, err := r.podCommand(ctx, d.Namespace, d.Name, d.Spec.Template.Spec)
	if err != nil || pc == nil {
		return err
	}
	r.mu.Lock()
	running, ok := r.pods[key]
	r.mu.Unlock()
	if ok {
		exited, _ := running.proc.Exited()
		if !exited && running.spec == pc.hash {
			return nil
		}
		r.sup.remove(running.proc, 10*time.Second)
	}
	return r.startPod(ctx, key, d.Namespace, d.Name, pc)
}

// podCommand is what runs a Pod of the spec: the first container, its secret volumes
// written as files and their mount paths rewritten in its args.
type podCommand struct {
	pod  corev1.PodSpec
	dir  string
	args []string
	hash string // of the command, args, env and mounted secrets
}

// podCommand prepares the Pod's process; nil while a secret it mounts does not exist, as
// a kubelet waits for it.
func (r *podRunner) podCommand(ctx context.Context, namespace, name string, pod corev1.PodSpec) (*podCommand, error) {
	if len(pod.Containers) == 0 || len(pod.Containers[0].Command) == 0 {
		return nil, fmt.Errorf("no container command to run")
	}
	c := pod.Containers[0]
	dir := filepath.Join(r.cp.Dir, "pods", namespace, name)
	args := append([]string(nil), c.Args...)
	for i := range args {
		for service, addr := range r.services {
			args[i] = strings.ReplaceAll(args[i], service, addr)
		}
	}
	hash := sha256.New()
	fmt.Fprintf(hash, "%v|%v|%v", c.Command, c.Args, c.Env)
	for _, vol := range pod.Volumes {
		if vol.Secret == nil {
			continue
		}
		secret, err := r.cp.Kube.CoreV1().Secrets(namespace).Get(ctx, vol.Secret.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		volDir := filepath.Join(dir, "volumes", vol.Name)
		if err := writeSecretVolume(volDir, secret, hash); err != nil {
			return nil, err
		}
		for _, m := range c.VolumeMounts {
			if m.Name == vol.Name {
				for i := range args {
					args[i] = strings.ReplaceAll(args[i], m.MountPath, volDir)
				}
			}
		}
	}
	return &podCommand{pod: pod, dir: dir, args: args, hash: hex.EncodeToString(hash.Sum(nil))}, nil
}

// startPod runs the Pod's process with what a kubelet gives it, and records it as the
// running pod key.
func (r *podRunner) startPod(ctx context.Context, key, namespace, name string, pc *podCommand) error {
	proc, err := r.startPodProcess(ctx, namespace, name, pc)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.pods[key] = &runningPod{proc: proc, spec: pc.hash}
	r.mu.Unlock()
	return nil
}

// startPodProcess runs the Pod's process with what a kubelet gives it: a token of its
// service account as $KUBECONFIG, its env.
func (r *podRunner) startPodProcess(ctx context.Context, namespace, name string, pc *podCommand) (*process, error) {
	c := pc.pod.Containers[0]
	kubeconfig := filepath.Join(pc.dir, "serviceaccount.kubeconfig")
	if err := r.cp.ServiceAccountKubeconfig(ctx, namespace, pc.pod.ServiceAccountName, kubeconfig, tokenTTL); err != nil {
		return nil, err
	}
	env := []string{"KUBECONFIG=" + kubeconfig, "POD_NAMESPACE=" + namespace, "POD_NAME=" + name + "-fleet"}
	for _, e := range c.Env {
		value, err := ContainerEnvValue(c, e)
		if err != nil {
			return nil, fmt.Errorf("pod of %s/%s: %w", namespace, name, err)
		}
		env = append(env, e.Name+"="+value)
	}
	return r.sup.start(processSpec{
		Name: r.cp.Name + "-pod-" + namespace + "-" + name,
		Path: filepath.Join(r.bin, filepath.Base(c.Command[0])),
		Args: append(c.Command[1:], pc.args...),
		Env:  env,
		Dir:  pc.dir,
	})
}

// reportPods does for the Deployment's Pods what their kubelet would. KWOK does not start
// the addon's Pods (see kwokConfig): the process this runner runs for the Deployment is
// what runs, so a bound Pod of the Deployment is Running and Ready while that process
// runs, and Pending while it does not (not started yet, or exited and about to restart).
// The Deployment's available replicas tell the truth about the process, and nothing else
// pretends to run it.
func (r *podRunner) reportPods(ctx context.Context, key string, d *appsv1.Deployment) error {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return err
	}
	pods, err := r.cp.Kube.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return err
	}
	r.mu.Lock()
	pod, started := r.pods[key]
	r.mu.Unlock()
	running := started
	if started {
		exited, _ := pod.proc.Exited()
		running = !exited
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || !setPodStatus(p, running, metav1.Now()) {
			continue
		}
		_, err := r.cp.Kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// setPodStatus sets the status a kubelet gives a bound Pod whose containers run (phase
// Running, Ready) or do not run yet (phase Pending, not Ready, ContainerCreating). It
// returns false, and changes nothing, when the Pod shows that already.
func setPodStatus(pod *corev1.Pod, running bool, now metav1.Time) bool {
	phase, ready := corev1.PodPending, corev1.ConditionFalse
	if running {
		phase, ready = corev1.PodRunning, corev1.ConditionTrue
	}
	if pod.Status.Phase == phase && podCondition(pod, corev1.PodReady) == ready {
		return false
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	conditions := []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		c := corev1.PodCondition{Type: t, Status: ready, LastTransitionTime: now}
		if !running {
			c.Reason, c.Message = "ContainersNotReady", fmt.Sprintf("containers with unready status: %v", names)
		}
		conditions = append(conditions, c)
	}
	// Conditions set by others (PodScheduled, by the scheduler) stay.
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodInitialized && c.Type != corev1.ContainersReady && c.Type != corev1.PodReady {
			conditions = append(conditions, c)
		}
	}
	pod.Status.Conditions = conditions
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		status := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: running, Started: &running}
		if running {
			status.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		} else {
			status.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, status)
	}
	pod.Status.Phase = phase
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &now
	}
	return true
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// writeSecretVolume writes each key of the secret as a file, as a secret volume does, and
// feeds the content to hash.
func writeSecretVolume(dir string, secret *corev1.Secret, hash interface{ Write([]byte) (int, error) }) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keys := make([]string, 0, len(secret.Data))
	for k := range secret.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		_, _ = hash.Write([]byte(k))
		_, _ = hash.Write(secret.Data[k])
		if err := os.WriteFile(filepath.Join(dir, k), secret.Data[k], 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (r *podRunner) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, pod := range r.pods {
		r.sup.remove(pod.proc, 10*time.Second)
		delete(r.pods, key)
	}
}

// ContainerEnvValue resolves an environment variable of a container as the kubelet
// does: its value, or a resource of the container through the downward API (in units of
// the divisor, rounded up). Other sources are not supported by the fleet.
func ContainerEnvValue(c corev1.Container, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	ref := e.ValueFrom.ResourceFieldRef
	if ref == nil {
		return "", fmt.Errorf("env %s: only value and resourceFieldRef are supported by the fleet", e.Name)
	}
	var quantity resource.Quantity
	switch ref.Resource {
	case "limits.memory":
		quantity = c.Resources.Limits[corev1.ResourceMemory]
	case "limits.cpu":
		quantity = c.Resources.Limits[corev1.ResourceCPU]
	case "requests.memory":
		quantity = c.Resources.Requests[corev1.ResourceMemory]
	case "requests.cpu":
		quantity = c.Resources.Requests[corev1.ResourceCPU]
	default:
		return "", fmt.Errorf("env %s: resource %q is not supported by the fleet", e.Name, ref.Resource)
	}
	if quantity.IsZero() {
		return "", nil // no limit: the kubelet gives the node's allocatable; the fleet leaves it unset
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	value := quantity.MilliValue()
	step := divisor.MilliValue()
	return strconv.FormatInt((value+step-1)/step, 10), nil
}
