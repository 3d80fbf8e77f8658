package predicates

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestOnUpdate(t *testing.T) {
	labelChanged := OnUpdate(func(oldObj, newObj *corev1.ConfigMap) bool {
		return oldObj.Labels["a"] != newObj.Labels["a"]
	})
	configMap := func(a string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": a}}}
	}
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"changed", configMap("1"), configMap("2"), true},
		{"unchanged", configMap("1"), configMap("1"), false},
		{"another type", &corev1.Secret{}, &corev1.Secret{}, true},
		{"one of another type", configMap("1"), &corev1.Secret{}, true},
	} {
		if got := labelChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: Update = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !labelChanged.Create(event.CreateEvent{Object: configMap("1")}) || !labelChanged.Delete(event.DeleteEvent{Object: configMap("1")}) ||
		!labelChanged.Generic(event.GenericEvent{Object: configMap("1")}) {
		t.Error("a creation, deletion or generic event is dropped")
	}
}

func TestExistenceChanged(t *testing.T) {
	now := metav1.Now()
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "1"}}}
	relabelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "2"}}}
	deleting := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"f"}}}
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"relabelled", live, relabelled, false},
		{"deletion starts", live, deleting, true},
		{"still deleting", deleting, deleting, false},
	} {
		if got := ExistenceChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: Update = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !ExistenceChanged.Create(event.CreateEvent{Object: live}) || !ExistenceChanged.Delete(event.DeleteEvent{Object: live}) {
		t.Error("a creation or deletion is dropped")
	}
}
