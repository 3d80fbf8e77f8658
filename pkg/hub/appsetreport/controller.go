package appsetreport

// This file wires the ApplicationSet report controller: its options, the watches that
// enqueue reports, and the reconcile that renders and writes one report.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubevents"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/sharedsettings"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
)

// ControllerName names the ApplicationSet report controller: its logs, metrics and Events.
const ControllerName = "argocd-pull-report"

// kindReport is the kind of the reports.
const kindReport = "MulticlusterApplicationSetReport"

// FieldManager is the server-side apply field manager of the reports.
const FieldManager = ControllerName

// Annotations this controller writes on each report, beside its statuses: the manager
// caches the reports as metadata only (hubcache), and reads in them what it wrote.
const (
	// AnnotationStatusesDigest is the statusesDigest of the statuses written.
	AnnotationStatusesDigest = "argocd-pull.open-cluster-management.io/statuses-digest"
	// AnnotationTruncated is "true" on a report cut to its budget; the served schema may
	// prune summary.truncated (an ACM hub), never an annotation.
	AnnotationTruncated = "argocd-pull.open-cluster-management.io/truncated"
)

// ReasonInvalidAgentReport is the reason of the Warning Event on a ManagedClusterAddOn
// whose agent report (or part of it) cannot be decoded.
const ReasonInvalidAgentReport = "InvalidAgentReport"

// Reasons of the Events on an ApplicationSet whose report exceeds its byte budget.
const (
	// ReasonReportTruncated: a Warning when the report starts being cut to its budget.
	ReasonReportTruncated = "ReportTruncated"
	// ReasonReportComplete: a Normal Event when a cut report fits again at full detail.
	ReasonReportComplete = "ReportComplete"
)

// Options configure the ApplicationSet report controller: the hub's settings that it
// shares with the other hub controllers (AddonName and Concurrency, required, and
// WatchNamespaces), which pkg/hub passes to each, and its own Settings.
type Options struct {
	// AddonName names every ManagedClusterAddOn of the addon.
	AddonName string
	// WatchNamespaces limits the reports to the ApplicationSets of these namespaces;
	// empty means all namespaces.
	WatchNamespaces []string
	// Concurrency is the number of parallel reconciles.
	Concurrency int
	Settings
}

// writeCostFactor: the pace of a report's writes is at least this many times as long as
// its last write took.
const writeCostFactor = 10

// writeBurst is how many writes of one report may follow each other without waiting
// for the pace (Settings.WriteInterval). Unrelated changes to the apps of one
// ApplicationSet often come a few within seconds; with a burst of two, every third one
// waited for the pace (seconds for a report of a megabyte), the tail of P2 in
// docs/benchmarks.md. Five are written at once; a rollout of hundreds of apps still
// costs five writes, then one per interval.
const writeBurst = 5

// writePace paces the writes of one report as a token bucket: a write spends one of
// writeBurst credits, and a credit comes back every spacing.
type writePace struct {
	credits float64
	at      time.Time // when credits was counted
	spacing time.Duration
}

func (p writePace) creditsAt(now time.Time) float64 {
	return min(writeBurst, p.credits+float64(now.Sub(p.at))/float64(p.spacing))
}

// validate reports options that cannot work.
func (o Options) validate() error {
	return errors.Join(
		sharedsettings.ValidateAddonName(o.AddonName),
		sharedsettings.ValidateConcurrency(o.Concurrency),
		o.Validate(), // Settings.Validate
	)
}

// Cache indexes of this controller.
const (
	// indexByApplicationSet indexes pulled ManifestWorks by their hosting-applicationset
	// annotation, and Applications by "<namespace>/<name>" of their ApplicationSet.
	indexByApplicationSet = "argocd-pull.report.applicationSet"
)

// Setup registers the ApplicationSet report controller with mgr. c reads through the
// manager's cache (hubcache.NewClient), which hubcache.Options scopes; decoder decodes
// the agents' reports, shared with the status mirror. The controller records the
// Events of invalid agent reports, and forgets the report of a deleted addon.
func Setup(mgr ctrl.Manager, c client.Client, decoder *observed.Decoder, opts Options) error {
	if err := opts.validate(); err != nil {
		return fmt.Errorf("invalid ApplicationSet report options: %w", err)
	}
	ctx := context.Background()
	// The works of an ApplicationSet, one in each cluster namespace: indexed across
	// namespaces only, as clusterApps lists them.
	if err := hubcache.IndexAcrossNamespaces(ctx, mgr.GetCache(), &workv1.ManifestWork{}, indexByApplicationSet, func(o client.Object) []string {
		if key := o.GetAnnotations()[argoapp.AnnotationHostingApplicationSet]; key != "" {
			return []string{key}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index ManifestWorks by ApplicationSet: %w", err)
	}
	// Its Applications, in its namespace: indexed across namespaces only too, each by
	// "<namespace>/<name>" of its ApplicationSet.
	if err := hubcache.IndexAcrossNamespaces(ctx, mgr.GetCache(), argoapp.NewApplication(), indexByApplicationSet, func(o client.Object) []string {
		if key, ok := applicationSetOf(o); ok {
			return []string{key.String()}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index Applications by ApplicationSet: %w", err)
	}
	r := &reconciler{client: c, decoder: decoder, recorder: hubevents.Recorder(mgr, ControllerName), opts: opts,
		pace: map[types.NamespacedName]writePace{}, written: map[types.NamespacedName]string{},
		truncated: map[types.NamespacedName]bool{}, served: &servedSchema{reader: mgr.GetAPIReader()},
		news: map[types.NamespacedName][sha256.Size]byte{}}
	agent := observed.AddonHandler{
		Reader: c, AddonName: opts.AddonName, MapWork: mapWork,
		MapApp: func(app clusterreport.App) (types.NamespacedName, bool) {
			return parseApplicationSetKey(app.ApplicationSet)
		},
		Changed: r.recordInvalidReport,
		Deleted: func(addon *addonv1beta1.ManagedClusterAddOn) { decoder.Forget(addon.Namespace, addon.Name) },
	}
	// The agent's report and its status slices enqueue the same requests.
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(argoapp.NewApplicationSet(), builder.WithPredicates(r.inNamespaces(), uidChanged)).
		Watches(&appsv1alpha1.MulticlusterApplicationSetReport{}, &handler.EnqueueRequestForObject{}, builder.OnlyMetadata,
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}, r.notOwnWrite())).
		Watches(argoapp.NewApplication(), handler.EnqueueRequestsFromMapFunc(mapApplication),
			builder.WithPredicates(applicationMembershipChanged)).
		Watches(&workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(mapWork),
			builder.WithPredicates(hostedByApplicationSet, observed.WorkObservationChangedPredicate)).
		Watches(&addonv1beta1.ManagedClusterAddOn{}, agent).
		Watches(&statusv1alpha1.ApplicationStatusSlice{}, statusslices.Handler(agent.EnqueueApp)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up the ApplicationSet report controller: %w", err)
	}
	return nil
}

type reconciler struct {
	client client.Client
	// decoder decodes the agents' reports.
	decoder  *observed.Decoder
	recorder events.EventRecorder
	opts     Options
	// served fits the reports to the CRD the hub serves.
	served *servedSchema

	mu sync.Mutex
	// pace paces the writes of each report (WriteInterval).
	pace map[types.NamespacedName]writePace
	// written is the resourceVersion of this controller's last write of each report
	// (notOwnWrite).
	written map[types.NamespacedName]string
	// truncated is whether each report was last seen or written cut to its budget, so
	// that the Events say when a cut starts and ends, also before the cache has seen
	// the last write.
	truncated map[types.NamespacedName]bool
	// news is the newsOf each report as last written, and held the reports that wait
	// for their apps to settle (settleWait).
	news map[types.NamespacedName][sha256.Size]byte
	held argoapp.SettleHolds[types.NamespacedName]
}

// untilWritable returns how long the report key must wait for its next write.
func (r *reconciler) untilWritable(key types.NamespacedName) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pace[key]
	if !ok {
		return 0
	}
	credits := p.creditsAt(time.Now())
	if credits >= 1 {
		return 0
	}
	return time.Duration((1 - credits) * float64(p.spacing))
}

// wrote records a write of the report key that took took and stored resourceVersion,
// or forgets the report when gone is true.
func (r *reconciler) wrote(key types.NamespacedName, took time.Duration, resourceVersion string, gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gone {
		delete(r.truncated, key)
		delete(r.written, key)
		delete(r.news, key)
		r.held.Forget(key)
	} else {
		r.written[key] = resourceVersion
	}
	if gone || r.opts.WriteInterval < 0 {
		delete(r.pace, key)
		return
	}
	now, credits := time.Now(), float64(writeBurst)
	if p, ok := r.pace[key]; ok {
		credits = p.creditsAt(now)
	}
	r.pace[key] = writePace{credits: credits - 1, at: now, spacing: max(r.opts.WriteInterval, writeCostFactor*took, time.Millisecond)}
}

// Reconcile renders the report of one ApplicationSet and writes it when it changed.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !r.watches(req.Namespace) {
		return ctrl.Result{}, nil
	}
	// Changes coalesce into the next write the pace allows; the queue holds the key once.
	if wait := r.untilWritable(req.NamespacedName); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	appSet := argoapp.NewApplicationSet()
	if err := r.client.Get(ctx, req.NamespacedName, appSet); err != nil {
		// Gone: the garbage collector deletes the report through its ownerReference.
		if apierrors.IsNotFound(err) {
			r.wrote(req.NamespacedName, 0, "", true)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	apps, recheck, foreign, err := r.clusterApps(ctx, req.NamespacedName, argoapp.TemplateSyncsAutomatically(appSet))
	if err != nil {
		return ctrl.Result{}, err
	}
	if foreign {
		// Another pull controller (Red Hat ACM's) serves Applications of this
		// ApplicationSet and writes the report of the same name: leave it to that
		// controller, neither written nor deleted. The Applications say why
		// (argoapp.ReasonServedByAnotherController).
		log.V(1).Info("leaving the report to the pull controller that serves the ApplicationSet's Applications", "report", req)
		return ctrl.Result{}, nil
	}
	current := &metav1.PartialObjectMetadata{}
	current.SetGroupVersionKind(appsv1alpha1.GroupVersion.WithKind(kindReport))
	err = r.client.Get(ctx, req.NamespacedName, current)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get report %s: %w", req, err)
	}
	exists := err == nil
	if len(apps) == 0 {
		// No pulled apps: no report. Delete the one this controller wrote.
		if exists && isOwnedBy(current, appSet) {
			r.forgetTruncation(req.NamespacedName)
			log.Info("deleting the report of an ApplicationSet without pulled apps", "report", req)
			return ctrl.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, current,
				client.Preconditions{ResourceVersion: &current.ResourceVersion}))
		}
		return ctrl.Result{}, nil
	}
	// The write time and the cut go in before the fit: the served schema may declare
	// neither lastUpdateTime nor summary.truncated. The counts are exact either way.
	rendered := RenderStatuses(req.Namespace, apps)
	news := newsOf(rendered.ClusterConditions)
	rendered.LastUpdateTime = ptr.To(metav1.NewTime(time.Now().Truncate(time.Second)))
	envelope, err := reportEnvelopeBytes(req.NamespacedName, appSet)
	if err != nil {
		return ctrl.Result{}, err
	}
	cut := CutToBudget(rendered, Budget{Bytes: r.opts.BudgetBytes, Envelope: envelope})
	statuses, err := r.served.fit(ctx, cut)
	if err != nil {
		return ctrl.Result{}, err
	}
	truncated := cut.Summary.Truncated
	storedTruncated := exists && current.Annotations[AnnotationTruncated] == "true"
	digest, err := statusesDigest(statuses)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("digest report %s: %w", req, err)
	}
	if exists && reportUpToDate(current, appSet, digest, truncated != nil) {
		r.swapTruncated(req.NamespacedName, truncated != nil, storedTruncated)
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	// While its apps roll out, a report is written when they settle, or once per
	// SettleWait while they do not; news go at once, and so does the undoing of another
	// writer's change.
	asWritten := exists && current.GetAnnotations()[hubcache.ReportOtherWriterAnnotation] == ""
	if wait := r.settleWait(req.NamespacedName, asWritten, apps, news, time.Now()); wait > 0 {
		if recheck > 0 {
			wait = min(wait, recheck)
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// Server-side apply of the fields this controller owns: no resourceVersion, so a
	// cache that has not caught up with the last write cannot make it conflict, and
	// whatever else is on the report (labels, annotations of other writers) stays. The
	// body holds only what the served schema declares (served.fit), so the apiserver's
	// field validation, by default a second, strict YAML parse of the whole body (up to
	// the budget), would find nothing: it is skipped.
	body, err := reportApplyBody(req.NamespacedName, appSet, statuses, digest, truncated != nil)
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := &appsv1alpha1.MulticlusterApplicationSetReport{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace}}
	start := time.Now()
	if err := r.client.Patch(ctx, desired, client.RawPatch(types.ApplyPatchType, body),
		client.FieldOwner(FieldManager), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore),
		hubcache.MetadataAnswer); err != nil {
		r.served.forget() // the CRD may have changed
		return ctrl.Result{}, fmt.Errorf("apply report %s: %w", req, err)
	}
	r.wrote(req.NamespacedName, time.Since(start), desired.ResourceVersion, false)
	r.wroteNews(req.NamespacedName, news)
	log.V(1).Info("applied report", "report", req, "clusters", statuses.Summary.Clusters)
	r.recordTruncation(ctx, req.NamespacedName, appSet, truncated,
		r.swapTruncated(req.NamespacedName, truncated != nil, storedTruncated))
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// swapTruncated records whether the report of key is cut now, and returns whether it
// was. Until this process has seen the report, it was cut when the stored report says
// so (stored: AnnotationTruncated).
func (r *reconciler) swapTruncated(key types.NamespacedName, now, stored bool) (was bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was, known := r.truncated[key]
	if !known {
		was = stored
	}
	r.truncated[key] = now
	return was
}

// forgetTruncation forgets whether the report of key was cut: it is gone.
func (r *reconciler) forgetTruncation(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.truncated, key)
}

// recordTruncation records, on the ApplicationSet, an Event and a log line when its
// report starts being cut to its budget (truncated, and it was not), and when it fits
// again at full detail; nothing while it stays as it was.
func (r *reconciler) recordTruncation(ctx context.Context, key types.NamespacedName, appSet *unstructured.Unstructured,
	truncated *appsv1alpha1.ReportTruncation, was bool) {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case truncated != nil && !was:
		log.Info("the report exceeds its byte budget: its detail is cut, its counts are exact", "report", key,
			"budgetBytes", truncated.BudgetBytes, "clustersCut", truncated.Clusters, "conditionsCut", truncated.Conditions,
			"messagesShortened", truncated.Messages, "detailsCut", truncated.Details, "resourcesCut", truncated.Resources)
		r.recorder.Eventf(appSet, nil, corev1.EventTypeWarning, ReasonReportTruncated, "WriteReport", "%s", truncated.Message)
	case truncated == nil && was:
		log.Info("the report fits its byte budget again, at full detail", "report", key, "budgetBytes", r.opts.BudgetBytes)
		r.recorder.Eventf(appSet, nil, corev1.EventTypeNormal, ReasonReportComplete, "WriteReport",
			"The report fits its budget of %d bytes again, at full detail.", r.opts.BudgetBytes)
	}
}

// reportUpToDate reports whether the report, as the cache holds it (its metadata),
// already holds the statuses of digest (as this controller wrote them, and no other
// writer changed them since: hubcache.ReportOtherWriterAnnotation), whether it is cut,
// its ApplicationSet label and its owner.
func reportUpToDate(current client.Object, appSet *unstructured.Unstructured, digest string, truncated bool) bool {
	annotations := current.GetAnnotations()
	return annotations[AnnotationStatusesDigest] == digest && annotations[hubcache.ReportOtherWriterAnnotation] == "" &&
		(annotations[AnnotationTruncated] == "true") == truncated &&
		current.GetLabels()[appsv1alpha1.LabelHostingApplicationSet] == HostingApplicationSetLabelValue(appSet.GetNamespace(), appSet.GetName()) &&
		isOwnedBy(current, appSet)
}

// statusesDigest is the digest of the JSON encoding of a report's statuses, but for
// their lastUpdateTime, which changes with every write.
func statusesDigest(statuses appsv1alpha1.AppConditions) (string, error) {
	statuses.LastUpdateTime = nil
	raw, err := json.Marshal(statuses)
	if err != nil {
		return "", err
	}
	return hubcache.DigestOf(raw), nil
}

// reportApply is a report as this controller applies it: the fields it owns, and no
// creationTimestamp (which a typed ObjectMeta encodes as null).
type reportApply struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        reportApplyMetadata        `json:"metadata"`
	Statuses        appsv1alpha1.AppConditions `json:"statuses"`
}

type reportApplyMetadata struct {
	Name            string                  `json:"name"`
	Namespace       string                  `json:"namespace"`
	Labels          map[string]string       `json:"labels"`
	Annotations     map[string]string       `json:"annotations"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
}

// reportApplyBody is the apply request of the report of the ApplicationSet key with
// statuses of digest, cut to the budget or not: its label, its annotations, its owner
// and the statuses, encoded from the typed report (a report of a thousand clusters is up
// to a megabyte, several times that as an unstructured object).
func reportApplyBody(key types.NamespacedName, appSet *unstructured.Unstructured, statuses appsv1alpha1.AppConditions, digest string, truncated bool) ([]byte, error) {
	annotations := map[string]string{AnnotationStatusesDigest: digest}
	if truncated {
		annotations[AnnotationTruncated] = "true"
	}
	report := &appsv1alpha1.MulticlusterApplicationSetReport{}
	setOwner(report, appSet)
	data, err := json.Marshal(reportApply{
		TypeMeta: metav1.TypeMeta{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: kindReport},
		Metadata: reportApplyMetadata{
			Name: key.Name, Namespace: key.Namespace,
			Labels:          map[string]string{appsv1alpha1.LabelHostingApplicationSet: HostingApplicationSetLabelValue(key.Namespace, key.Name)},
			Annotations:     annotations,
			OwnerReferences: report.OwnerReferences,
		},
		Statuses: statuses,
	})
	if err != nil {
		return nil, fmt.Errorf("encode report %s: %w", key, err)
	}
	return data, nil
}

// reportEnvelopeBytes is what the report of the ApplicationSet key takes as applied
// besides its statuses (apiVersion, kind, name, namespace, label, annotations, at their
// longest, and owner), plus MetadataReserveBytes for what the apiserver adds.
func reportEnvelopeBytes(key types.NamespacedName, appSet *unstructured.Unstructured) (int, error) {
	data, err := reportApplyBody(key, appSet, appsv1alpha1.AppConditions{}, hubcache.DigestOf(nil), true)
	if err != nil {
		return 0, err
	}
	return len(data) - statusesBytes(appsv1alpha1.AppConditions{}) + MetadataReserveBytes, nil
}

// clusterApps gathers the pulled Applications of the ApplicationSet, each with its work,
// feedback and agent report; syncsAutomatically is whether the ApplicationSet's template
// syncs its apps on their own (ClusterApp.Passing). recheck, when positive, is when an
// app missing from its agent's report is to be looked at again
// (observed.Observation.RecheckAfter).
func (r *reconciler) clusterApps(ctx context.Context, appSet types.NamespacedName, syncsAutomatically bool) (out []ClusterApp, recheck time.Duration, foreign bool, err error) {
	apps := argoapp.NewApplicationList()
	// Read-only: the cache's objects, not copies of a thousand apps and works per report,
	// and the apps as the cache holds them (their metadata; servedByAnother reads the
	// status when it may say so).
	if err := r.client.List(ctx, apps, client.MatchingFields{indexByApplicationSet: appSet.String()},
		client.UnsafeDisableDeepCopy, hubcache.KeepFrozen); err != nil {
		return nil, 0, false, fmt.Errorf("list the Applications of %s: %w", appSet, err)
	}
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.MatchingFields{indexByApplicationSet: appSet.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, 0, false, fmt.Errorf("list the ManifestWorks of %s: %w", appSet, err)
	}
	worksByName := map[types.NamespacedName]*workv1.ManifestWork{}
	for i := range works.Items {
		worksByName[client.ObjectKeyFromObject(&works.Items[i])] = &works.Items[i]
	}
	addons := map[string]*addonv1beta1.ManagedClusterAddOn{}
	now := time.Now()
	out = make([]ClusterApp, 0, len(apps.Items))
	for i := range apps.Items {
		app := &apps.Items[i]
		annotations := app.GetAnnotations() // a copy: read it once
		if pulled, err := argoapp.IsPullRequested(app.GetLabels(), annotations); err != nil || !pulled {
			continue
		}
		if app.GetDeletionTimestamp() != nil {
			continue
		}
		if servedByAnother(app) {
			foreign = true
			continue
		}
		cluster := annotations[argoapp.AnnotationOCMManagedCluster]
		workName := argoapp.ManifestWorkName(app.GetName(), app.GetUID())
		work := worksByName[types.NamespacedName{Namespace: cluster, Name: workName}]
		addon, ok := addons[cluster]
		if !ok {
			addon = &addonv1beta1.ManagedClusterAddOn{}
			if err := r.client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: r.opts.AddonName}, addon, client.UnsafeDisableDeepCopy); err != nil {
				if !apierrors.IsNotFound(err) {
					return nil, 0, false, fmt.Errorf("get the addon of cluster %s: %w", cluster, err)
				}
				addon = nil
			}
			addons[cluster] = addon
		}
		// The Event of a rejection is recorded by the addon watch, that of an absence by
		// the status mirror, on the hub Application.
		obs := r.decoder.Observe(addon, work, client.ObjectKeyFromObject(app), now)
		if obs.RecheckAfter > 0 && (recheck == 0 || obs.RecheckAfter < recheck) {
			recheck = obs.RecheckAfter
		}
		state := observed.Merge(observed.FeedbackOf(work), obs.App)
		_, operation := app.Object["operation"]
		out = append(out, ClusterApp{
			Cluster: cluster, HubApp: app.GetName(), ManifestWork: workName,
			State:       state,
			Stale:       observed.StalenessOf(addon),
			Rejected:    obs.Rejection,
			NotReported: obs.Absence,
			// The cache holds the app's spec frozen: its template's sync policy stands in.
			Passing: !operation && argoapp.PassingState(state.SyncStatus, state.HealthStatus, state.OperationPhase, syncsAutomatically),
		})
	}
	return out, recheck, foreign, nil
}

func (r *reconciler) watches(namespace string) bool {
	return len(r.opts.WatchNamespaces) == 0 || slices.Contains(r.opts.WatchNamespaces, namespace)
}

// notOwnWrite drops the watch event of a report that shows this controller's last write
// of it: that write was rendered from what the controller would read again, and
// reading it again renders the report of every cluster (tens of milliseconds of CPU at
// a thousand) to find it up to date. Another writer's change, and a deletion, pass.
func (r *reconciler) notOwnWrite() predicate.Funcs {
	own := func(o client.Object) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		rv, ok := r.written[client.ObjectKeyFromObject(o)]
		return ok && rv == o.GetResourceVersion()
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !own(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return !own(e.ObjectNew) },
	}
}

func (r *reconciler) inNamespaces() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return r.watches(o.GetNamespace()) })
}

// setOwner makes the ApplicationSet the report's controller owner, so that the garbage
// collector deletes the report with it.
func setOwner(report *appsv1alpha1.MulticlusterApplicationSetReport, appSet *unstructured.Unstructured) {
	owner := metav1.OwnerReference{
		APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.KindApplicationSet,
		Name: appSet.GetName(), UID: appSet.GetUID(), Controller: ptr.To(true),
	}
	refs := slices.DeleteFunc(slices.Clone(report.OwnerReferences), func(ref metav1.OwnerReference) bool {
		return ref.Kind == argoapp.KindApplicationSet && strings.HasPrefix(ref.APIVersion, argoapp.Group+"/")
	})
	report.OwnerReferences = append(refs, owner)
}

func isOwnedBy(report client.Object, appSet *unstructured.Unstructured) bool {
	return slices.ContainsFunc(report.GetOwnerReferences(), func(ref metav1.OwnerReference) bool {
		return ref.UID == appSet.GetUID()
	})
}

// Event mapping.

// applicationSetOf returns the ApplicationSet that owns a hub Application.
func applicationSetOf(app client.Object) (types.NamespacedName, bool) {
	name, ok := argoapp.OwningApplicationSet(app.GetOwnerReferences())
	return types.NamespacedName{Namespace: app.GetNamespace(), Name: name}, ok
}

func mapApplication(_ context.Context, app client.Object) []reconcile.Request {
	if key, ok := applicationSetOf(app); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// parseApplicationSetKey parses "<namespace>/<name>".
func parseApplicationSetKey(key string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(key, "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}

func mapWork(_ context.Context, work client.Object) []reconcile.Request {
	if key, ok := parseApplicationSetKey(work.GetAnnotations()[argoapp.AnnotationHostingApplicationSet]); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// recordInvalidReport decodes a new version of the agent's report, and records what it
// rejects as a Warning Event, once per version.
func (r *reconciler) recordInvalidReport(ctx context.Context, addon *addonv1beta1.ManagedClusterAddOn) {
	err := r.decoder.ClaimError(addon)
	if err == nil {
		return
	}
	var rejected []string
	for _, de := range clusterreport.DecodeErrors(err) {
		rejected = append(rejected, de.Error())
	}
	ctrl.LoggerFrom(ctx).Error(err, "the agent's report is invalid; its other entries are used",
		"cluster", addon.Namespace, "rejected", len(rejected))
	note := clusterreport.TruncateMessage(fmt.Sprintf("%d entries of the agent's report were rejected; their apps show the last good report, if any: %s",
		len(rejected), strings.Join(rejected, "; ")), 1000)
	r.recorder.Eventf(addon, nil, corev1.EventTypeWarning, ReasonInvalidAgentReport, "DecodeReport", "%s", note)
}

// Predicates.

// uidChanged passes creations, deletions and the updates that change the UID, which
// none does: of the ApplicationSet, the report reads only its UID.
var uidChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool { return e.ObjectOld.GetUID() != e.ObjectNew.GetUID() },
}

// applicationMembershipChanged passes the changes of a hub Application that can change
// which reports it is in: not its status, which this controller does not read, except
// whether another pull controller serves it.
var applicationMembershipChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetUID() != n.GetUID() || servedByAnother(o) != servedByAnother(n) ||
			!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
			!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
			!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
			(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
	},
}

// hostedByApplicationSet passes the works of ApplicationSet apps: those with the
// hosting-applicationset annotation, before or after an update.
var hostedByApplicationSet = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return isApplicationSetWork(e.Object) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return isApplicationSetWork(e.Object) },
	GenericFunc: func(e event.GenericEvent) bool { return isApplicationSetWork(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return isApplicationSetWork(e.ObjectOld) || isApplicationSetWork(e.ObjectNew)
	},
}

func isApplicationSetWork(o client.Object) bool {
	return o.GetAnnotations()[argoapp.AnnotationHostingApplicationSet] != ""
}

// servedByAnother is argoapp.IsServedByAnotherController for the cache's own objects:
// the watch's, and those that clusterApps lists. Of an Application as the cache holds
// it, the status is thawed only when it may hold the condition, which few apps have.
func servedByAnother(obj client.Object) bool {
	app, ok := obj.(*unstructured.Unstructured)
	if !ok || !hubcache.MayHold(app, "status", argoapp.ConditionOCMPropagationError) {
		return false
	}
	app = hubcache.Thawed(app)
	return app != nil && argoapp.IsServedByAnotherController(app)
}
