package spoke

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
)

// hubState is what the agent knows of its ManagedClusterAddOn on the hub.
type hubState struct {
	// known: the agent has read or written the object since it started or last resynced.
	known bool
	// exists: the object exists; the agent cannot create it.
	exists bool
	// object identifies the object for Events.
	object corev1.ObjectReference
	// resourceVersion orders what the watch and the writes report.
	resourceVersion string
	// conditions are the agent's own conditions on the object.
	conditions []metav1.Condition
}

// observeHubObject records a ManagedClusterAddOn from the watch, and asks for a publish:
// the agent's conditions may have been changed by someone else, and an event means the
// hub is reachable, so a waiting retry may go now.
func (a *agent) observeHubObject(obj any) {
	addon, ok := obj.(*addonv1beta1.ManagedClusterAddOn)
	if !ok || addon.Name != a.opts.AddonName {
		return
	}
	a.recordHub(addon)
	a.onHubChange()
}

// onHubChange asks for a publish after a change on the hub: the agent's report may have
// been changed by someone else, and an event means the hub is reachable, so a waiting
// retry may go now.
func (a *agent) onHubChange() {
	a.backingOff.Store(false)
	a.queue.AddAfter(reportKey, a.opts.PublishDelay)
}

// observeHubDeletion records that the ManagedClusterAddOn is gone.
func (a *agent) observeHubDeletion(any) {
	a.hubMu.Lock()
	a.hub = hubState{known: true}
	a.hubMu.Unlock()
	a.log.Info("the ManagedClusterAddOn was deleted; waiting for it to come back")
}

// recordHub records the state of the ManagedClusterAddOn, unless the agent already knows
// a newer one.
func (a *agent) recordHub(addon *addonv1beta1.ManagedClusterAddOn) {
	state := hubState{
		known:  true,
		exists: true,
		object: corev1.ObjectReference{
			APIVersion: addonv1beta1.GroupVersion.String(), Kind: "ManagedClusterAddOn",
			Namespace: addon.Namespace, Name: addon.Name, UID: addon.UID, ResourceVersion: addon.ResourceVersion,
		},
		resourceVersion: addon.ResourceVersion,
		conditions:      ownConditions(addon.Status.Conditions),
	}
	a.hubMu.Lock()
	defer a.hubMu.Unlock()
	if a.hub.known && a.hub.exists && a.hub.object.UID == addon.UID && olderResourceVersion(addon.ResourceVersion, a.hub.resourceVersion) {
		return
	}
	a.hub = state
}

// hubSnapshot returns the known state of the ManagedClusterAddOn.
func (a *agent) hubSnapshot() hubState {
	a.hubMu.Lock()
	defer a.hubMu.Unlock()
	return a.hub
}

// forgetHub makes the next publish read the ManagedClusterAddOn from the hub.
func (a *agent) forgetHub() {
	a.hubMu.Lock()
	defer a.hubMu.Unlock()
	a.hub = hubState{}
}
