package fleet

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWritesByWriter: the completed writes of the window are counted by user, verb and
// resource with its subresource; other stages, requests without an object, and writes
// outside the window are not.
func TestWritesByWriter(t *testing.T) {
	event := func(stage, at, user, verb, resource, subresource string) string {
		ref := `"objectRef":{"resource":"` + resource + `","subresource":"` + subresource + `","name":"x"},`
		if resource == "" {
			ref = ""
		}
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"` + stage + `","verb":"` + verb + `",` + ref +
			`"user":{"username":"` + user + `","groups":["system:authenticated"]},"stageTimestamp":"` + at + `"}`
	}
	const manager, workAgent = "system:serviceaccount:argocd-pull-addon:argocd-pull-addon-manager", "system:open-cluster-management:cluster1:x1"
	lines := []string{
		event("ResponseComplete", "2026-11-28T16:50:00.000000Z", manager, "patch", "applications", ""), // before the window
		event("ResponseComplete", "2026-11-28T16:50:01.000000Z", manager, "patch", "applications", ""),
		event("ResponseComplete", "2026-11-28T16:50:02.500000Z", manager, "patch", "applications", ""),
		event("ResponseStarted", "2026-11-28T16:50:03.000000Z", manager, "patch", "applications", ""),
		event("ResponseComplete", "2026-11-28T16:50:03.000000Z", workAgent, "patch", "manifestworks", "status"),
		event("ResponseComplete", "2026-11-28T16:50:04.000000Z", manager, "create", "", ""),                     // no object: a non-resource request
		event("ResponseComplete", "2026-11-28T16:50:09.000000Z", workAgent, "patch", "manifestworks", "status"), // after it
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 28, 16, 50, 1, 0, time.UTC)
	got, err := WritesByWriter(path, from, from.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Writer]int{
		{User: manager, Verb: "patch", Resource: "applications"}:           2,
		{User: workAgent, Verb: "patch", Resource: "manifestworks/status"}: 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("WritesByWriter = %v, want %v", got, want)
	}

	if err := os.WriteFile(path, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WritesByWriter(path, from, from.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "audit.log:1") {
		t.Errorf("WritesByWriter of a broken line = %v, want an error naming the line", err)
	}
}
