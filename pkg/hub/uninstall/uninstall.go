// Package uninstall takes the addon off a hub without surprises: it stops the manager,
// then either leaves every pulled Application running on its cluster (the works are
// orphaned) or removes them from the clusters (the works are deleted), releases the
// manager's finalizer from the hub Applications and deletes the Argo CD cluster Secrets
// the manager made (when the manager keeps them: otherwise it holds no right on them).
// The chart runs it as a pre-delete hook (docs/operations.md, "Uninstall").
package uninstall

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/apppatch"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/clustersecret"
)

// FieldManager names the uninstall's writes to hub Applications.
const FieldManager = "argocd-pull-uninstall"

// Mode is what happens to the pulled Applications on the managed clusters.
type Mode string

const (
	// LeaveRunning orphans the works: each cluster keeps its Application, which its own
	// Argo CD keeps syncing, and the Application's resources.
	LeaveRunning Mode = "leave-running"
	// RemoveApps deletes the works: each cluster's work agent deletes its Application, and
	// Argo CD prunes its resources where the Application carries its resources finalizer.
	RemoveApps Mode = "remove-apps"
)

// Options say what to uninstall and how.
type Options struct {
	Mode            Mode
	AddonName       string
	ArgoCDNamespace string
	// ClusterSecrets deletes the Argo CD cluster Secrets the manager made. It is the
	// manager's --cluster-secrets: without it, the manager's identity may not list or
	// delete Secrets, and the Secrets stay.
	ClusterSecrets bool
	// Namespace, Deployment and Lease locate the manager: it is scaled to zero, and the
	// clean-up starts once its leader election Lease is released or has expired.
	Namespace  string
	Deployment string
	Lease      string
	// Timeout bounds the wait for the manager to stop and for the clusters to act on their
	// works. What is left after it is logged and left in place.
	Timeout time.Duration
}

// AddFlags registers on fs a flag for each option, its default o's.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar((*string)(&o.Mode), "mode", string(o.Mode),
		fmt.Sprintf("%s: the clusters keep their Applications and workloads; %s: the Applications are removed from the clusters", LeaveRunning, RemoveApps))
	fs.StringVar(&o.AddonName, "addon-name", o.AddonName, "name of the ClusterManagementAddOn")
	fs.StringVar(&o.ArgoCDNamespace, "argocd-namespace", o.ArgoCDNamespace, "namespace of the hub Argo CD (the cluster Secrets)")
	fs.BoolVar(&o.ClusterSecrets, "cluster-secrets", o.ClusterSecrets,
		"the manager's --cluster-secrets: delete the Argo CD cluster Secrets it made; false leaves them (the manager may not touch them then)")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the manager's Deployment and leader election Lease")
	fs.StringVar(&o.Deployment, "deployment", o.Deployment, "the manager's Deployment, scaled to zero first")
	fs.StringVar(&o.Lease, "lease", o.Lease, "the manager's leader election Lease")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait for the manager to stop and for the clusters to act on their works")
}

func (o Options) validate() error {
	switch {
	case o.Mode != LeaveRunning && o.Mode != RemoveApps:
		return fmt.Errorf("mode %q: want %s or %s", o.Mode, LeaveRunning, RemoveApps)
	case o.AddonName == "", o.ArgoCDNamespace == "", o.Namespace == "", o.Deployment == "", o.Lease == "":
		return fmt.Errorf("addon name, Argo CD namespace, namespace, deployment and lease are required")
	case o.Timeout <= 0:
		return fmt.Errorf("timeout must be positive")
	}
	return nil
}

// Result counts what Run did and names what it left.
type Result struct {
	Orphaned, Deleted int
	// Left are the works (namespace/name) that stayed: in LeaveRunning mode, their
	// cluster never applied the orphan option, so deleting them would delete their
	// Application; in RemoveApps mode, their cluster never confirmed the deletion.
	Left              []string
	FinalizersRemoved int
	SecretsDeleted    int
}

// leave records the works left in place, each logged with why.
func (r *Result) leave(log klog.Logger, works []string, why string) {
	for _, key := range works {
		log.Info(why, "work", key)
	}
	r.Left = append(r.Left, works...)
	slices.Sort(r.Left)
}

// Run uninstalls. It is safe to run twice: a second run finds less to do.
func Run(ctx context.Context, cfg *rest.Config, opts Options) (Result, error) {
	var res Result
	if err := opts.validate(); err != nil {
		return res, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	works, err := workclient.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return res, err
	}
	log := klog.FromContext(ctx)

	// The manager first: a running manager would recreate the works and the finalizers.
	if err := stopManager(ctx, kube, opts); err != nil {
		return res, err
	}
	log.Info("the manager stopped", "deployment", opts.Namespace+"/"+opts.Deployment)

	selector := argoapp.LabelAddon + "=" + opts.AddonName
	list, err := works.WorkV1().ManifestWorks("").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return res, fmt.Errorf("list the addon's ManifestWorks: %w", err)
	}
	switch opts.Mode {
	case LeaveRunning:
		err = orphanWorks(ctx, works, list.Items, selector, opts.Timeout, &res)
	case RemoveApps:
		err = deleteWorks(ctx, works, list.Items, selector, opts.Timeout, &res)
	}
	if err != nil {
		return res, err
	}
	if res.FinalizersRemoved, err = releaseFinalizers(ctx, c); err != nil {
		return res, err
	}
	if !opts.ClusterSecrets {
		log.Info("the manager keeps no cluster Secrets (--cluster-secrets=false): none deleted")
		return res, nil
	}
	if res.SecretsDeleted, err = deleteClusterSecrets(ctx, kube, opts); err != nil {
		return res, err
	}
	return res, nil
}

// stopManager scales the manager to zero and waits until no replica leads: the Lease is
// released (the manager releases it when it stops) or has expired.
func stopManager(ctx context.Context, kube kubernetes.Interface, opts Options) error {
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: opts.Deployment, Namespace: opts.Namespace}}
	current, err := kube.AppsV1().Deployments(opts.Namespace).GetScale(ctx, opts.Deployment, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read the manager's scale: %w", err)
	case current.Spec.Replicas != 0:
		scale.ResourceVersion = current.ResourceVersion
		if _, err := kube.AppsV1().Deployments(opts.Namespace).UpdateScale(ctx, opts.Deployment, scale, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("scale the manager to zero: %w", err)
		}
	}
	var holder string
	err = wait.PollUntilContextTimeout(ctx, time.Second, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		lease, err := kube.CoordinationV1().Leases(opts.Namespace).Get(ctx, opts.Lease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder == "" || expired(lease, time.Now()), nil
	})
	if err != nil {
		return fmt.Errorf("the manager still leads (Lease %s/%s held by %q): %w", opts.Namespace, opts.Lease, holder, err)
	}
	return nil
}

func expired(lease *coordinationv1.Lease, now time.Time) bool {
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second))
}

// orphanWorks sets each work's deleteOption to Orphan, waits until its cluster's work
// agent applied that generation (the agent then drops its owner reference from the
// Application, OCM's helper.ApplyOwnerReferences), and only then deletes the work. The
// agent deletes, when a work goes, every resource that still carries its owner
// reference, so a work whose cluster did not apply the option in time is left in place.
func orphanWorks(ctx context.Context, works workclient.Interface, items []workv1.ManifestWork, selector string, timeout time.Duration, res *Result) error {
	patch := []byte(`{"spec":{"deleteOption":{"propagationPolicy":"Orphan"}}}`)
	pending := map[types.NamespacedName]int64{} // work -> generation to be applied
	for i := range items {
		w := &items[i]
		key := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
		if w.DeletionTimestamp != nil {
			res.Left = append(res.Left, key.String()) // already being deleted: too late
			continue
		}
		updated, err := works.WorkV1().ManifestWorks(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("orphan %s: %w", key, err)
		}
		pending[key] = updated.Generation
	}
	log := klog.FromContext(ctx)
	left := awaitWorks(ctx, works, selector, pending, timeout, func(key types.NamespacedName, w *workv1.ManifestWork, generation int64) bool {
		if w == nil {
			return true // gone meanwhile
		}
		applied := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
		if applied == nil || applied.ObservedGeneration < generation || applied.Status != metav1.ConditionTrue {
			return false
		}
		if err := works.WorkV1().ManifestWorks(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false
		}
		log.Info("orphaned", "work", key)
		res.Orphaned++
		return true
	})
	res.leave(log, left, "left in place: its cluster did not apply the orphan option in time, and deleting it would delete the Application there")
	return nil
}

// deleteWorks deletes each work and waits until its cluster removed it.
func deleteWorks(ctx context.Context, works workclient.Interface, items []workv1.ManifestWork, selector string, timeout time.Duration, res *Result) error {
	pending := map[types.NamespacedName]int64{}
	for i := range items {
		w := &items[i]
		key := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
		if err := works.WorkV1().ManifestWorks(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", key, err)
		}
		pending[key] = w.Generation
	}
	log := klog.FromContext(ctx)
	left := awaitWorks(ctx, works, selector, pending, timeout, func(key types.NamespacedName, w *workv1.ManifestWork, _ int64) bool {
		if w != nil {
			return false
		}
		log.Info("removed", "work", key)
		res.Deleted++
		return true
	})
	res.leave(log, left, "still being deleted: its cluster has not removed the Application yet; the work goes once it does")
	return nil
}

// awaitWorks reads the addon's works (selector) once a second, one List for all, and
// asks done about each pending work (nil once it is gone) until every one is done or
// timeout has passed; it returns the keys of those that are not.
func awaitWorks(ctx context.Context, works workclient.Interface, selector string, pending map[types.NamespacedName]int64, timeout time.Duration,
	done func(key types.NamespacedName, w *workv1.ManifestWork, generation int64) bool) []string {
	_ = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := works.WorkV1().ManifestWorks("").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil // the next round reads again
		}
		live := make(map[types.NamespacedName]*workv1.ManifestWork, len(list.Items))
		for i := range list.Items {
			live[types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}] = &list.Items[i]
		}
		for key, generation := range pending {
			if done(key, live[key], generation) {
				delete(pending, key)
			}
		}
		return len(pending) == 0, nil
	})
	left := make([]string, 0, len(pending))
	for key := range pending {
		left = append(left, key.String())
	}
	return left
}

// releaseFinalizers removes from every hub Application the finalizers that only the
// manager would have removed: its clean-up finalizer and, where the pull model handles
// them (argoapp.HandlesArgoCDFinalizers: a pulled Application the hub Argo CD skips and
// no other pull controller serves), Argo CD's finalizers. Without the manager they could
// only keep the Application in Terminating forever. Each write is apppatch's merge patch
// with optimistic locking, as the manager's own.
func releaseFinalizers(ctx context.Context, c client.Client) (int, error) {
	apps := argoapp.NewApplicationList()
	if err := c.List(ctx, apps); err != nil {
		return 0, fmt.Errorf("list the hub Applications: %w", err)
	}
	released := 0
	for i := range apps.Items {
		app := &apps.Items[i]
		releaseArgoCD := argoapp.HandlesArgoCDFinalizers(app, argoapp.IsServedByAnotherController(app))
		wrote, err := apppatch.MergePatch(ctx, c, c, app, func(app *unstructured.Unstructured) (bool, error) {
			return len(argoapp.ReleaseFinalizers(app, releaseArgoCD)) > 0, nil
		}, client.FieldOwner(FieldManager))
		if err != nil && !apierrors.IsNotFound(err) {
			return released, fmt.Errorf("release %s/%s: %w", app.GetNamespace(), app.GetName(), err)
		}
		if wrote {
			released++
		}
	}
	return released, nil
}

// deleteClusterSecrets deletes the Argo CD cluster Secrets the manager made, never
// another tool's.
func deleteClusterSecrets(ctx context.Context, kube kubernetes.Interface, opts Options) (int, error) {
	selector := argoapp.LabelSecretType + "=" + argoapp.SecretTypeCluster + "," + clustersecret.LabelManagedBy + "=" + opts.AddonName
	list, err := kube.CoreV1().Secrets(opts.ArgoCDNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, fmt.Errorf("list the cluster Secrets: %w", err)
	}
	deleted := 0
	for i := range list.Items {
		s := &list.Items[i]
		if err := kube.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &s.UID},
		}); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("delete the cluster Secret %s: %w", s.Name, err)
		}
		deleted++
	}
	return deleted, nil
}
