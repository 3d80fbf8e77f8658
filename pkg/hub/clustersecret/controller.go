// Package clustersecret keeps an Argo CD cluster Secret in the hub Argo CD's namespace for
// every managed cluster that has opted into the addon, so that ApplicationSet cluster
// generators can select the clusters by name and by their ManagedCluster labels.
//
// The Secret carries no credentials: the hub Argo CD never deploys to these clusters;
// the pull model does. Its server is the cluster's API URL from the ManagedCluster, or a
// placeholder that cannot resolve.
package clustersecret

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/predicates"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/sharedsettings"
)

const (
	// ControllerName names the controller, and is the field manager of the Secrets.
	ControllerName = "argocd-pull-cluster-secret"

	// LabelManagedBy, set to the addon name, marks the Secrets this controller owns.
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// PlaceholderServerFormat gives the server of a cluster whose ManagedCluster has no
	// client config: a URL under the reserved .invalid domain, which never resolves.
	PlaceholderServerFormat = "https://%s.ocm.invalid"
)

// Options configure the controller: the hub's settings that it shares with the other hub
// controllers, which pkg/hub passes to each (Settings say whether it runs). All fields
// are required.
type Options struct {
	// AddonName names the ManagedClusterAddOn that opts a cluster in.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace, where the Secrets live.
	ArgoCDNamespace string
	// Concurrency is the number of parallel reconciles.
	Concurrency int
	// ResourceProxy, when set, makes each Secret reach the cluster through the resource
	// proxy (pkg/hub/resourceproxy); nil leaves the Secrets without credentials.
	ResourceProxy *ProxyAccess
}

// ProxyAccess is how argocd-server reaches the resource proxy: through the hub apiserver at
// HubServer, which it trusts with CAData, as the service account whose token Secret, in
// the Argo CD namespace, is TokenSecret.
type ProxyAccess struct {
	HubServer   string
	CAData      []byte
	TokenSecret string
}

// validate reports options that cannot work.
func (o Options) validate() error {
	return errors.Join(
		sharedsettings.ValidateAddonName(o.AddonName),
		sharedsettings.ValidateArgoCDNamespace(o.ArgoCDNamespace),
		sharedsettings.ValidateConcurrency(o.Concurrency),
	)
}

// SecretName returns the name of the cluster Secret of a cluster.
func SecretName(addonName, cluster string) string {
	return cluster + "-" + addonName + "-cluster"
}

// Setup registers the controller with mgr. The manager's scheme needs client-go's, OCM
// cluster v1 and addon v1beta1 types. The Secrets are read through two caches of their
// own, limited to the Argo CD namespace: the Secrets of this addon, and the Argo CD
// cluster Secrets of other tools (othersCache), so that the manager never lists the
// Secrets of the hub. It reads no Secret by name: its RBAC in the Argo CD namespace is
// list, watch, create, patch and delete on Secrets, and no get.
func Setup(mgr ctrl.Manager, opts Options) error {
	return setup(mgr, opts, mgr.GetClient())
}

// setup is Setup with the client that the controller writes with and reads the
// ManagedClusters and ManagedClusterAddOns through.
func setup(mgr ctrl.Manager, opts Options, c client.Client) error {
	if err := opts.validate(); err != nil {
		return fmt.Errorf("invalid cluster secret options: %w", err)
	}
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{opts.ArgoCDNamespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{
			argoapp.LabelSecretType: argoapp.SecretTypeCluster,
			LabelManagedBy:          opts.AddonName,
		}),
	})
	if err != nil {
		return fmt.Errorf("create the cluster secret cache: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return fmt.Errorf("add the cluster secret cache: %w", err)
	}
	others, err := othersCache(mgr, opts)
	if err != nil {
		return err
	}
	r := &reconciler{client: c, secrets: secrets, others: others, opts: opts}
	if opts.ResourceProxy != nil {
		kube, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return err
		}
		r.tokens = &proxyToken{secrets: kube.CoreV1().Secrets(opts.ArgoCDNamespace), name: opts.ResourceProxy.TokenSecret}
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, cluster client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: cluster.GetName()}}}
			}), builder.WithPredicates(clusterChanged)).
		Watches(&addonv1beta1.ManagedClusterAddOn{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, addon client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: addon.GetNamespace()}}}
			}), builder.WithPredicates(predicate.NewPredicateFuncs(func(addon client.Object) bool {
			return addon.GetName() == opts.AddonName
		}), predicates.ExistenceChanged)).
		WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, secret *corev1.Secret) []reconcile.Request {
				if cluster := secret.Labels[clusterv1.ClusterNameLabelKey]; cluster != "" {
					return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: cluster}}}
				}
				return nil
			}))).
		// Another tool's cluster Secret that comes or goes decides whether the cluster
		// needs this one.
		WatchesRawSource(source.Kind(others, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, secret *corev1.Secret) []reconcile.Request {
				if cluster := string(secret.Data[secretClusterName]); cluster != "" {
					return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: cluster}}}
				}
				return nil
			}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up the cluster secret controller: %w", err)
	}
	return nil
}

// reconciler keeps the cluster Secret of one cluster; requests are keyed by the cluster
// name.
type reconciler struct {
	client  client.Client
	secrets client.Reader
	// others reads the cluster Secrets of other tools (othersCache).
	others client.Reader
	opts   Options
	// tokens reads the resource proxy's client token, with Options.ResourceProxy.
	tokens *proxyToken
}

// secretClusterName is the key of an Argo CD cluster Secret's data that names its
// cluster.
const secretClusterName = "name"

// indexByClusterName indexes the cluster Secrets of other tools by the cluster they name.
const indexByClusterName = "argocd-pull.clusterName"

// othersCache returns a cache of the Argo CD cluster Secrets in the Argo CD namespace
// that this addon did not make (Red Hat ACM's GitOpsCluster makes one per cluster),
// indexed by the cluster they name, each without anything but its metadata and the
// cluster's name: no server, no credentials. Every reconcile asks it, at 1,000 clusters
// 1,000 times at each start; a list of the apiserver each time made that a list of 1,000
// Secrets 1,000 times.
func othersCache(mgr ctrl.Manager, opts Options) (cache.Cache, error) {
	notOurs, err := labels.NewRequirement(LabelManagedBy, selection.NotEquals, []string{opts.AddonName})
	if err != nil {
		return nil, err
	}
	clusterSecrets, err := labels.NewRequirement(argoapp.LabelSecretType, selection.Equals, []string{argoapp.SecretTypeCluster})
	if err != nil {
		return nil, err
	}
	others, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{opts.ArgoCDNamespace: {}},
		DefaultLabelSelector: labels.NewSelector().Add(*clusterSecrets, *notOurs),
		DefaultTransform: func(obj any) (any, error) {
			secret, ok := obj.(*corev1.Secret)
			if !ok {
				return obj, nil
			}
			name := secret.Data[secretClusterName]
			return &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Name: secret.Name, Namespace: secret.Namespace, UID: secret.UID,
					ResourceVersion: secret.ResourceVersion, Labels: secret.Labels,
				},
				Data: map[string][]byte{secretClusterName: name},
			}, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create the cache of other tools' cluster secrets: %w", err)
	}
	err = others.IndexField(context.Background(), &corev1.Secret{}, indexByClusterName, func(obj client.Object) []string {
		if secret, ok := obj.(*corev1.Secret); ok && len(secret.Data[secretClusterName]) > 0 {
			return []string{string(secret.Data[secretClusterName])}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index other tools' cluster secrets: %w", err)
	}
	if err := mgr.Add(others); err != nil {
		return nil, fmt.Errorf("add the cache of other tools' cluster secrets: %w", err)
	}
	return others, nil
}

// Reconcile creates or updates the cluster Secret when the cluster is opted in (its
// ManagedCluster and the addon's ManagedClusterAddOn exist), and deletes it otherwise.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cluster := req.Name
	managedCluster, optedIn, err := r.optedIn(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	key := types.NamespacedName{Namespace: r.opts.ArgoCDNamespace, Name: SecretName(r.opts.AddonName, cluster)}
	existing := &corev1.Secret{}
	if err := r.secrets.Get(ctx, key, existing); apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("get secret %s: %w", key, err)
	}

	why := ""
	switch {
	case !optedIn:
		why = "the cluster opted out"
	default:
		other, err := r.otherClusterSecret(ctx, cluster)
		if err != nil {
			return ctrl.Result{}, err
		}
		if other != "" {
			// Argo CD takes the first cluster Secret that matches a name or a server:
			// a second one would shadow, or be shadowed by, the one another tool keeps.
			why = "the cluster already has the Argo CD cluster secret " + other
		}
	}
	if why != "" {
		if existing == nil || existing.DeletionTimestamp != nil {
			log.V(1).Info("no Argo CD cluster secret to keep", "cluster", cluster, "reason", why)
			return ctrl.Result{}, nil
		}
		err := r.client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("delete secret %s: %w", key, err)
		}
		log.Info("deleted the Argo CD cluster secret", "secret", key, "reason", why)
		return ctrl.Result{}, nil
	}

	desired := desiredSecret(key, managedCluster, r.opts.AddonName)
	// Without the resource proxy's client token (its Secret not filled yet, or gone), the
	// Secret is kept without a way to the proxy, for the ApplicationSet generators, and
	// the token is asked again soon.
	var result ctrl.Result
	if r.opts.ResourceProxy != nil {
		token, err := r.tokens.get(ctx)
		if err != nil {
			log.Info("the Argo CD cluster secret waits for the resource proxy's client token", "secret", key, "error", err.Error())
			result.RequeueAfter = tokenRetry
		} else if err := withProxyAccess(desired, cluster, *r.opts.ResourceProxy, token); err != nil {
			return ctrl.Result{}, err
		}
	}
	if existing != nil {
		owned, err := corev1ac.ExtractSecret(existing, ControllerName)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("extract the fields of secret %s: %w", key, err)
		}
		if equality.Semantic.DeepEqual(owned, desired) {
			return result, nil
		}
	}
	if err := r.client.Apply(ctx, desired, client.FieldOwner(ControllerName), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("apply secret %s: %w", key, err)
	}
	log.Info("applied the Argo CD cluster secret", "secret", key, "created", existing == nil)
	return result, nil
}

// otherClusterSecret returns the name of an Argo CD cluster Secret of the cluster that
// this controller did not make (Red Hat ACM's GitOpsCluster makes one per cluster with
// the same name and server), or "".
func (r *reconciler) otherClusterSecret(ctx context.Context, cluster string) (string, error) {
	secrets := &corev1.SecretList{}
	if err := r.others.List(ctx, secrets, client.MatchingFields{indexByClusterName: cluster}); err != nil {
		return "", fmt.Errorf("list the Argo CD cluster secrets of other tools: %w", err)
	}
	names := make([]string, 0, len(secrets.Items))
	for i := range secrets.Items {
		names = append(names, secrets.Items[i].Name)
	}
	if len(names) == 0 {
		return "", nil
	}
	slices.Sort(names)
	return names[0], nil
}

// optedIn returns the ManagedCluster, and whether the cluster is opted in.
func (r *reconciler) optedIn(ctx context.Context, cluster string) (*clusterv1.ManagedCluster, bool, error) {
	managedCluster := &clusterv1.ManagedCluster{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, managedCluster); apierrors.IsNotFound(err) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("get managed cluster %s: %w", cluster, err)
	}
	if managedCluster.DeletionTimestamp != nil {
		return nil, false, nil
	}
	addon := &addonv1beta1.ManagedClusterAddOn{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: r.opts.AddonName}, addon)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("get managed cluster addon %s/%s: %w", cluster, r.opts.AddonName, err)
	}
	return managedCluster, addon.DeletionTimestamp == nil, nil
}

// desiredSecret returns the cluster Secret of a ManagedCluster: its labels, the Argo CD
// cluster marker and the addon's own labels; its name and server; no credentials.
func desiredSecret(key types.NamespacedName, cluster *clusterv1.ManagedCluster, addonName string) *corev1ac.SecretApplyConfiguration {
	secretLabels := maps.Clone(cluster.Labels)
	if secretLabels == nil {
		secretLabels = map[string]string{}
	}
	secretLabels[argoapp.LabelSecretType] = argoapp.SecretTypeCluster
	secretLabels[LabelManagedBy] = addonName
	secretLabels[clusterv1.ClusterNameLabelKey] = cluster.Name
	return corev1ac.Secret(key.Name, key.Namespace).
		WithLabels(secretLabels).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{
			"name":   []byte(cluster.Name),
			"server": []byte(serverOf(cluster)),
		})
}

// serverOf returns the API URL of a ManagedCluster: its first client config, else a
// placeholder.
func serverOf(cluster *clusterv1.ManagedCluster) string {
	for _, config := range cluster.Spec.ManagedClusterClientConfigs {
		if config.URL != "" {
			return config.URL
		}
	}
	return fmt.Sprintf(PlaceholderServerFormat, cluster.Name)
}

// clusterChanged keeps the events of a ManagedCluster that change its Secret: creation,
// deletion, and an update of its labels or client configs, or the start of its deletion.
var clusterChanged = predicates.OnUpdate(func(oldCluster, newCluster *clusterv1.ManagedCluster) bool {
	return !equality.Semantic.DeepEqual(oldCluster.Labels, newCluster.Labels) ||
		serverOf(oldCluster) != serverOf(newCluster) ||
		(oldCluster.DeletionTimestamp == nil) != (newCluster.DeletionTimestamp == nil)
})
