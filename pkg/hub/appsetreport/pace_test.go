package appsetreport

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestWritePace: the first writes of a report in a row go at once, up to writeBurst;
// then one per interval, or per writeCostFactor times the last write's duration when that
// is longer; a report left alone for an interval earns its credit back.
func TestWritePace(t *testing.T) {
	const interval = time.Second
	r := &reconciler{opts: Options{Settings: Settings{WriteInterval: interval}}, pace: map[types.NamespacedName]writePace{}, written: map[types.NamespacedName]string{}}
	key := types.NamespacedName{Namespace: "argocd", Name: "guestbook"}
	near := func(got, want time.Duration) bool { return got <= want && got > want-100*time.Millisecond }

	if wait := r.untilWritable(key); wait != 0 {
		t.Fatalf("a report never written waits %v", wait)
	}
	for i := 1; i < writeBurst; i++ {
		r.wrote(key, 10*time.Millisecond, "1", false)
		if wait := r.untilWritable(key); wait != 0 {
			t.Errorf("write %d in a row waits %v, want none (burst of %d)", i+1, wait, writeBurst)
		}
	}
	r.wrote(key, 10*time.Millisecond, "1", false)
	if wait := r.untilWritable(key); !near(wait, interval) {
		t.Errorf("after %d writes in a row the next waits %v, want about %v", writeBurst, wait, interval)
	}

	// A write that took long spaces the next by writeCostFactor times its duration.
	slow := types.NamespacedName{Namespace: "argocd", Name: "fleet"}
	for range writeBurst {
		r.wrote(slow, 300*time.Millisecond, "1", false)
	}
	if wait := r.untilWritable(slow); !near(wait, writeCostFactor*300*time.Millisecond) {
		t.Errorf("after slow writes the next waits %v, want about %v", wait, writeCostFactor*300*time.Millisecond)
	}

	// Credits come back with time, up to writeBurst.
	p := r.pace[key]
	p.at = p.at.Add(-10 * interval)
	r.pace[key] = p
	for i := 1; i < writeBurst; i++ {
		r.wrote(key, 10*time.Millisecond, "1", false)
		if wait := r.untilWritable(key); wait != 0 {
			t.Errorf("a report quiet for 10 intervals, written %d times, waits %v", i, wait)
		}
	}
	r.wrote(key, 10*time.Millisecond, "1", false)
	if wait := r.untilWritable(key); wait == 0 {
		t.Errorf("credits grew past the burst of %d", writeBurst)
	}

	// Gone: forgotten.
	r.wrote(key, 0, "", true)
	if _, ok := r.pace[key]; ok {
		t.Error("the pace of a deleted report is kept")
	}
}
