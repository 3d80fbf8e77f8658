package fleet

// This file is the hub apiserver's audit log of writes: who wrote what, for the suites
// that count the hub's writes by writer (the e2e spec of a rollout's cost).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// hubAuditPolicy logs each write request to the hub apiserver once it completed, at the
// Metadata level (who, the verb, the resource; no body), and nothing else.
const hubAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditArgs writes the hub's audit policy into dir and returns the apiserver flags that
// log by it to the file at log, one JSON event a line, each written as its request
// completes (the default blocking mode, no batch that would hold events back for seconds).
func auditArgs(dir, log string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(hubAuditPolicy), 0o600); err != nil {
		return nil, err
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + log, "--audit-log-format=json"}, nil
}

// Writer is who made a kind of write: the user, as the apiserver authenticated it, the
// verb, and the resource, with its subresource after a slash (manifestworks/status).
type Writer struct {
	User, Verb, Resource string
}

// auditEvent is what WritesByWriter reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Stage          string    `json:"stage"`
	Verb           string    `json:"verb"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// WritesByWriter counts the writes that the audit log at path records as completed from
// from to to (ResponseComplete, by their stage timestamp), by writer.
func WritesByWriter(path string, from, to time.Time) (map[Writer]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[Writer]int{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; scanner.Scan(); line++ {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.StageTimestamp.Before(from) || e.StageTimestamp.After(to) {
			continue
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		counts[Writer{User: e.User.Username, Verb: e.Verb, Resource: resource}]++
	}
	if err := scanner.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("read %s", path), err)
	}
	return counts, nil
}
