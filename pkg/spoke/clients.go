package spoke

// This file holds the agent's clients of the hub and of the managed cluster. They are
// client-go's dynamic and REST clients only, with the agent's few types converted from
// unstructured content: a typed clientset, the discovery client or a generated informer
// links client-go's registry of every Kubernetes API (k8s.io/client-go/kubernetes/scheme),
// whose code and data made up most of the agent's resident memory (docs/design.md,
// section 3.7).

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
)

// The resources the agent reads and writes besides Applications and its status slices.
var (
	addonGVR  = schema.GroupVersionResource{Group: addonv1beta1.GroupName, Version: "v1beta1", Resource: "managedclusteraddons"}
	eventGVR  = corev1.SchemeGroupVersion.WithResource("events")
	secretGVR = corev1.SchemeGroupVersion.WithResource("secrets")
	leaseGVR  = coordinationv1.SchemeGroupVersion.WithResource("leases")
)

// newInformer returns an informer of the objects of r that tweak selects, without a
// resync: client-go's reflector, list then watch, through the dynamic client.
func newInformer(r dynamic.ResourceInterface, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return r.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, 0, cache.Indexers{})
}

// noTweak selects every object.
func noTweak(*metav1.ListOptions) {}

// fromUnstructured converts u into the typed obj.
func fromUnstructured(u *unstructured.Unstructured, obj any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("decode %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// toUnstructured converts the typed obj, of apiVersion and kind, into unstructured content.
func toUnstructured(obj any, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// addonClient reads the agent's ManagedClusterAddOn on the hub, and applies its status.
type addonClient struct {
	r dynamic.ResourceInterface
}

func (c addonClient) Get(ctx context.Context, name string) (*addonv1beta1.ManagedClusterAddOn, error) {
	u, err := c.r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return addonOf(u)
}

// ApplyStatus applies body, a server-side apply configuration, to the status of the
// addon name, as FieldManager, forcing conflicts.
func (c addonClient) ApplyStatus(ctx context.Context, name string, body []byte) (*addonv1beta1.ManagedClusterAddOn, error) {
	u, err := c.r.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}, "status")
	if err != nil {
		return nil, err
	}
	return addonOf(u)
}

// addonOf converts a ManagedClusterAddOn, without its managed fields.
func addonOf(u *unstructured.Unstructured) (*addonv1beta1.ManagedClusterAddOn, error) {
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := fromUnstructured(u, addon); err != nil {
		return nil, err
	}
	addon.ManagedFields = nil
	return addon, nil
}

// typedAddon is the transform of the ManagedClusterAddOn informer.
func typedAddon(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return addonOf(u)
}

// eventRecorder records the agent's Events on the hub, in the namespace of the object
// each is about, from one goroutine, so that a slow hub never holds up a publish. The
// agent records an Event only when a diagnostic turns or the report starts being cut,
// so it needs neither the aggregation nor the spam filter of client-go's recorder, whose
// strategic merge patches link the OpenAPI models, protobuf and YAML (several MiB
// resident). Like client-go's, it names each Event after its object and the time, tries
// each up to eventTries times, eventRetryInterval apart, and drops Events when
// eventQueueLength are waiting.
type eventRecorder struct {
	events dynamic.NamespaceableResourceInterface
	source corev1.EventSource
	queue  chan *corev1.Event
	retry  time.Duration
}

const (
	eventTries         = 12
	eventRetryInterval = 10 * time.Second
	eventQueueLength   = 100
)

var eventGVK = corev1.SchemeGroupVersion.WithKind("Event")

func newEventRecorder(events dynamic.NamespaceableResourceInterface, source corev1.EventSource) *eventRecorder {
	return &eventRecorder{events: events, source: source, queue: make(chan *corev1.Event, eventQueueLength), retry: eventRetryInterval}
}

// Event queues an Event of eventType (corev1.EventTypeNormal or Warning) about object.
func (r *eventRecorder) Event(object *corev1.ObjectReference, eventType, reason, message string) {
	now := metav1.Now()
	e := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", object.Name, now.UnixNano()), Namespace: object.Namespace},
		InvolvedObject:      *object,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventType,
		Source:              r.source,
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
	select {
	case r.queue <- e:
	default:
	}
}

// run writes the queued Events until ctx is done.
func (r *eventRecorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-r.queue:
			r.write(ctx, e)
		}
	}
}

func (r *eventRecorder) write(ctx context.Context, e *corev1.Event) {
	body, err := toUnstructured(e, eventGVK)
	if err != nil {
		klog.FromContext(ctx).Error(err, "encode an Event", "reason", e.Reason)
		return
	}
	for try := 1; ; try++ {
		_, err := r.events.Namespace(e.Namespace).Create(ctx, body, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || try == eventTries {
			if err != nil && !apierrors.IsAlreadyExists(err) {
				klog.FromContext(ctx).Error(err, "record an Event on the hub; dropped", "reason", e.Reason, "tries", try)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.retry):
		}
	}
}

// dynamicSecrets reads the Secrets of one namespace.
type dynamicSecrets struct {
	r dynamic.ResourceInterface
}

func (s dynamicSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	u, err := s.r.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	return secret, fromUnstructured(u, secret)
}

// leaseDurationSeconds and leaseJitter are those of the addon framework's lease
// updater (open-cluster-management.io/addon-framework/pkg/lease), which the hub's lease
// health prober expects.
const (
	leaseDurationSeconds = 60
	leaseJitter          = 0.25
)

// renewLease keeps the Lease name in namespace on the managed cluster renewed until ctx
// is done, as the addon framework's lease updater does: at once, then every
// leaseDurationSeconds jittered by leaseJitter, it creates the Lease or sets its
// renewTime to now.
func renewLease(ctx context.Context, leases dynamic.NamespaceableResourceInterface, name, namespace string) {
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if err := updateLease(ctx, leases.Namespace(namespace), name, namespace); err != nil {
			klog.FromContext(ctx).Error(err, "update the agent's lease", "lease", namespace+"/"+name)
		}
	}, leaseDurationSeconds*time.Second, leaseJitter, true)
}

func updateLease(ctx context.Context, leases dynamic.ResourceInterface, name, namespace string) error {
	gvk := coordinationv1.SchemeGroupVersion.WithKind("Lease")
	now := &metav1.MicroTime{Time: time.Now()}
	u, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds), RenewTime: now},
		}
		body, err := toUnstructured(lease, gvk)
		if err != nil {
			return err
		}
		_, err = leases.Create(ctx, body, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{}
	if err := fromUnstructured(u, lease); err != nil {
		return err
	}
	lease.Spec.RenewTime = now
	body, err := toUnstructured(lease, gvk)
	if err != nil {
		return err
	}
	_, err = leases.Update(ctx, body, metav1.UpdateOptions{})
	return err
}

// discoveryClient asks an apiserver which resources a group version serves.
type discoveryClient struct {
	rest rest.Interface
}

// newDiscoveryClient returns a discovery client of the apiserver of config.
func newDiscoveryClient(config *rest.Config) (discoveryClient, error) {
	c, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(config))
	if err != nil {
		return discoveryClient{}, err
	}
	return discoveryClient{rest: c}, nil
}

// ServerResourcesForGroupVersion returns the resources that the apiserver serves in gv
// (the core group's under /api), or a NotFound error when it does not serve gv.
func (d discoveryClient) ServerResourcesForGroupVersion(ctx context.Context, gv schema.GroupVersion) (*metav1.APIResourceList, error) {
	path := []string{"/apis", gv.Group, gv.Version}
	if gv.Group == "" {
		path = []string{"/api", gv.Version}
	}
	raw, err := d.rest.Get().AbsPath(path...).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("decode the discovery of %s: %w", gv, err)
	}
	return list, nil
}
