package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// demo brings the fleet up and shows it working: a ConfigMap and an Argo CD Application
// delivered to every managed cluster by ManifestWork, and the Application synced there by
// the cluster's own Argo CD, its status reported back to the hub as work feedback.
func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	var c common
	c.register(fs, ".fleet")
	_ = fs.Parse(args)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	fmt.Println("== Starting the local fleet: a hub and", c.clusters)
	f, err := c.start(ctx)
	if err != nil {
		return err
	}
	defer f.Stop()
	works, err := workclient.NewForConfig(f.Hub.Config)
	if err != nil {
		return err
	}

	for _, mc := range f.Clusters {
		fmt.Printf("\n== %s: a ManifestWork delivers a ConfigMap\n", mc.Name)
		start := time.Now()
		mw := fleet.ManifestWork("demo-configmap", mc.Name, fleet.DemoConfigMap("demo-configmap", "default"))
		if _, err := works.WorkV1().ManifestWorks(mc.Name).Create(ctx, mw, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := mc.Kube.CoreV1().ConfigMaps("default").Get(ctx, "demo-configmap", metav1.GetOptions{})
			return err == nil, ignoreNotFound(err)
		}); err != nil {
			return fmt.Errorf("ConfigMap not delivered to %s: %w", mc.Name, err)
		}
		fmt.Printf("   ConfigMap default/demo-configmap exists on %s after %.1fs\n", mc.Name, time.Since(start).Seconds())
	}

	for _, mc := range f.Clusters {
		fmt.Printf("\n== %s: a ManifestWork delivers an Argo CD Application; the cluster's Argo CD syncs it\n", mc.Name)
		start := time.Now()
		app := fleet.GuestbookApplication("guestbook", f.Git.URL())
		mw := fleet.ManifestWork("demo-guestbook", mc.Name, app)
		mw.Spec.ManifestConfigs = []workv1.ManifestConfigOption{fleet.ApplicationStatusFeedback(app)}
		if _, err := works.WorkV1().ManifestWorks(mc.Name).Create(ctx, mw, metav1.CreateOptions{}); err != nil {
			return err
		}
		spokeApps, err := dynamic.NewForConfig(mc.Config)
		if err != nil {
			return err
		}
		var sync, health string
		if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
			got, err := works.WorkV1().ManifestWorks(mc.Name).Get(ctx, "demo-guestbook", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			sync, _ = fleet.FeedbackValue(got, 0, "syncStatus")
			health, _ = fleet.FeedbackValue(got, 0, "healthStatus")
			return sync == "Synced", nil
		}); err != nil {
			return fmt.Errorf("guestbook on %s not Synced (last feedback sync=%q health=%q): %w", mc.Name, sync, health, err)
		}
		got, err := spokeApps.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, "guestbook", metav1.GetOptions{})
		if err != nil {
			return err
		}
		rev, _, _ := unstructured.NestedString(got.Object, "status", "sync", "revision")
		fmt.Printf("   Application argocd/guestbook on %s: sync %s, health %s, revision %.12s (hub feedback after %.1fs)\n",
			mc.Name, sync, health, rev, time.Since(start).Seconds())
		deploy, err := mc.Kube.AppsV1().Deployments(fleet.GuestbookNamespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		if err != nil {
			return err
		}
		fmt.Printf("   Deployment %s/%s deployed by Argo CD (no kubelet runs its Pods, so health stays Progressing)\n",
			deploy.Namespace, deploy.Name)
	}

	fmt.Println("\n== The fleet works. It stays up until Ctrl-C.")
	printAccess(f)
	fmt.Println("Try: kubectl --kubeconfig", f.Hub.Kubeconfig, "get manifestworks -A")
	return waitForSignal(ctx, f)
}

func poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, cond)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	return err
}
