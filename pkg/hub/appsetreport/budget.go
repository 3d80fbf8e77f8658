package appsetreport

// This file cuts a report to its byte budget. RenderStatuses counts the summary before
// anything is cut, so the counts stay exact; CutToBudget then lowers the detail, step by
// step in the order of cutSteps, until the report fits, and says in the summary what it
// cut. Each step is a pure function of the rendered report: an unchanged input gives an
// unchanged report, and so no write.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// Bounds of the budget.
const (
	// MetadataReserveBytes is the part of the budget kept for what the apiserver adds to
	// the applied report: uid, resourceVersion, generation, creationTimestamp and the
	// managedFields. The report's lists are atomic, so the managedFields name their
	// fields, not their entries: about 1 KiB per field manager.
	MetadataReserveBytes = 16 << 10
	// MinBudgetBytes is the smallest budget the controller accepts: room for the
	// metadata, the summary and a few hundred entries.
	MinBudgetBytes = 64 << 10
	// ShortMessageBytes and ShortestMessageBytes are the lengths the cut shortens the
	// condition messages to, in two steps; a shortened message ends in "...".
	ShortMessageBytes    = 256
	ShortestMessageBytes = 128
	// maxTruncationMessageBytes bounds the message of summary.truncated.
	maxTruncationMessageBytes = 512
)

// Budget bounds the JSON of one report.
type Budget struct {
	// Bytes is the most the whole report may take as JSON, metadata included.
	Bytes int64
	// Envelope is what the report takes besides its statuses: apiVersion, kind and its
	// metadata as applied, plus MetadataReserveBytes.
	Envelope int
}

// limit is the most bytes of JSON that the statuses may take.
func (b Budget) limit() int { return int(b.Bytes) - b.Envelope }

// entryClass orders the entries for the cut: the Synced and Healthy ones lose detail
// first, those with an error last.
type entryClass int

const (
	// classHealthy: Synced and Healthy, without an error condition.
	classHealthy entryClass = iota
	// classOther: neither Synced and Healthy nor failing (Progressing, OutOfSync,
	// Degraded, Unknown, or only the report's own warnings).
	classOther
	// classFailing: with an error condition of Argo CD (a type ending in Error).
	classFailing
)

// classOf returns the class of an entry.
func classOf(e appsv1alpha1.ClusterCondition) entryClass {
	if slices.ContainsFunc(e.Conditions, func(c appsv1alpha1.Condition) bool { return clusterreport.IsErrorCondition(c.Type) }) {
		return classFailing
	}
	if e.SyncStatus == argoapp.SyncSynced && e.HealthStatus == argoapp.HealthHealthy {
		return classHealthy
	}
	return classOther
}

// cutStep lowers the detail of the entries of some classes: each class in turn, and in
// a class, from the last entry of the report (in cluster order) to the first, one entry
// at a time, until the report fits.
type cutStep struct {
	classes []entryClass
	// lower lowers the detail of one entry and reports whether it changed it.
	lower func(e *appsv1alpha1.ClusterCondition) bool
	// drop leaves whole entries out, instead of lower.
	drop bool
}

// notHealthy: the other entries before the failing ones.
var notHealthy = []entryClass{classOther, classFailing}

// cutSteps is the order of the cut, after the resource list (docs/design.md, section
// 2.5): the errors stay visible longest, and every cluster keeps an
// entry until only whole entries are left to cut.
var cutSteps = []cutStep{
	{classes: []entryClass{classHealthy}, lower: dropConditionsAndDetails},
	{classes: notHealthy, lower: shortenMessages(ShortMessageBytes)},
	{classes: notHealthy, lower: keepFirstCondition},
	{classes: notHealthy, lower: shortenMessages(ShortestMessageBytes)},
	{classes: []entryClass{classHealthy}, drop: true},
	{classes: notHealthy, lower: dropDetails},
	{classes: []entryClass{classOther}, drop: true},
	{classes: []entryClass{classFailing}, drop: true},
}

// dropConditionsAndDetails leaves out the conditions, the sync revisions and the
// operation state of the entry.
func dropConditionsAndDetails(e *appsv1alpha1.ClusterCondition) bool {
	changed := len(e.Conditions) > 0
	e.Conditions = nil
	return dropDetails(e) || changed
}

// keepFirstCondition leaves out the conditions after the first: the first error, as
// errors come first.
func keepFirstCondition(e *appsv1alpha1.ClusterCondition) bool {
	if len(e.Conditions) <= 1 {
		return false
	}
	e.Conditions = e.Conditions[:1:1]
	return true
}

// shortenMessages returns a step that cuts each condition message of an entry to n
// bytes.
func shortenMessages(n int) func(e *appsv1alpha1.ClusterCondition) bool {
	return func(e *appsv1alpha1.ClusterCondition) bool {
		if !slices.ContainsFunc(e.Conditions, func(c appsv1alpha1.Condition) bool { return len(c.Message) > n }) {
			return false
		}
		e.Conditions = slices.Clone(e.Conditions) // shared with the full rendering
		for i := range e.Conditions {
			e.Conditions[i].Message = clusterreport.TruncateMessage(e.Conditions[i].Message, n)
		}
		return true
	}
}

// dropDetails leaves out the sync revisions and the operation state of the entry.
func dropDetails(e *appsv1alpha1.ClusterCondition) bool {
	if !hasDetails(*e) {
		return false
	}
	e.SyncRevision, e.SyncRevisions, e.OperationStatePhase, e.OperationStateStartedAt = "", nil, "", ""
	return true
}

func hasDetails(e appsv1alpha1.ClusterCondition) bool {
	return e.SyncRevision != "" || len(e.SyncRevisions) > 0 || e.OperationStatePhase != "" || e.OperationStateStartedAt != ""
}

// CutToBudget returns statuses cut to fit the budget. Statuses that fit are returned
// as they are. Otherwise the detail is cut, in this order, each step only as far as
// needed: the resource list from its end; then the entries, step by step as cutSteps
// says; and summary.truncated says what was cut. The summary's counts are never
// touched. The result is a function of statuses and the budget only; when even the
// smallest report does not fit, it is the smallest report.
func CutToBudget(statuses appsv1alpha1.AppConditions, budget Budget) appsv1alpha1.AppConditions {
	statuses.Summary.Truncated = nil
	if statusesBytes(statuses) <= budget.limit() {
		return statuses
	}
	c := newCutter(statuses, budget)
	c.run()
	return c.result()
}

// statusesBytes is the size of the JSON of statuses.
func statusesBytes(statuses appsv1alpha1.AppConditions) int {
	return jsonBytes(statuses)
}

func jsonBytes(v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // plain strings and numbers: cannot fail
	}
	return len(data)
}

// listBytes is the size of a list field of the statuses in JSON: its key, the brackets,
// the items and their commas, and the comma after it (the summary always follows);
// nothing when the list is empty (omitempty).
func listBytes(key string, n, itemBytes int) int {
	if n == 0 {
		return 0
	}
	return len(key) + len(`"":[],`) + itemBytes + n - 1
}

// cutter holds a report being cut and its size, kept up to date entry by entry.
type cutter struct {
	full   appsv1alpha1.AppConditions
	budget Budget

	entries    []appsv1alpha1.ClusterCondition
	classes    []entryClass
	entryBytes []int
	dropped    []bool
	// resources is how many of the first resources are kept.
	resources     int
	resourceBytes []int

	// base is the size of the statuses without their lists, with the largest
	// summary.truncated the cut can write; the sums are those of the items kept.
	base                 int
	entriesN, entriesSum int
	resourcesSum         int
}

func newCutter(full appsv1alpha1.AppConditions, budget Budget) *cutter {
	c := &cutter{full: full, budget: budget, entries: slices.Clone(full.ClusterConditions), resources: len(full.Resources)}
	c.classes = make([]entryClass, len(c.entries))
	c.entryBytes = make([]int, len(c.entries))
	c.dropped = make([]bool, len(c.entries))
	conditions := 0
	for i, e := range c.entries {
		c.classes[i] = classOf(e)
		c.entryBytes[i] = jsonBytes(e)
		c.entriesSum += c.entryBytes[i]
		conditions += len(e.Conditions)
	}
	c.entriesN = len(c.entries)
	c.resourceBytes = make([]int, len(full.Resources))
	for i, r := range full.Resources {
		c.resourceBytes[i] = jsonBytes(r)
		c.resourcesSum += c.resourceBytes[i]
	}
	// The largest truncation: every count at its most, the longest message.
	bound := appsv1alpha1.AppConditions{Summary: full.Summary, LastUpdateTime: full.LastUpdateTime}
	bound.Summary.Truncated = &appsv1alpha1.ReportTruncation{
		BudgetBytes: budget.Bytes, Clusters: int32(len(c.entries)), Conditions: int32(conditions),
		Messages: int32(conditions), Details: int32(len(c.entries)), Resources: int32(len(full.Resources)),
		Message: strings.Repeat("x", maxTruncationMessageBytes),
	}
	c.base = statusesBytes(bound)
	return c
}

// total is the size of the statuses as cut so far, summary.truncated at its largest.
func (c *cutter) total() int {
	return c.base + listBytes("resources", c.resources, c.resourcesSum) + listBytes("clusterConditions", c.entriesN, c.entriesSum)
}

func (c *cutter) fits() bool { return c.total() <= c.budget.limit() }

// run cuts until the statuses fit, or nothing is left to cut.
func (c *cutter) run() {
	for c.resources > 0 && !c.fits() {
		c.resources--
		c.resourcesSum -= c.resourceBytes[c.resources]
	}
	for _, step := range cutSteps {
		for _, class := range step.classes {
			for i := len(c.entries) - 1; i >= 0 && !c.fits(); i-- {
				if c.dropped[i] || c.classes[i] != class {
					continue
				}
				if step.drop {
					c.dropped[i] = true
					c.entriesN--
					c.entriesSum -= c.entryBytes[i]
					continue
				}
				if step.lower(&c.entries[i]) {
					size := jsonBytes(c.entries[i])
					c.entriesSum += size - c.entryBytes[i]
					c.entryBytes[i] = size
				}
			}
		}
	}
}

// result is the cut statuses, with summary.truncated.
func (c *cutter) result() appsv1alpha1.AppConditions {
	out := c.full
	out.Resources = c.full.Resources[:c.resources:c.resources]
	out.ClusterConditions = nil
	t := appsv1alpha1.ReportTruncation{BudgetBytes: c.budget.Bytes, Resources: int32(len(c.full.Resources) - c.resources)}
	for i, e := range c.entries {
		if c.dropped[i] {
			t.Clusters++
			continue
		}
		full := c.full.ClusterConditions[i]
		t.Conditions += int32(len(full.Conditions) - len(e.Conditions))
		for j, cond := range e.Conditions {
			if cond.Message != full.Conditions[j].Message {
				t.Messages++
			}
		}
		if hasDetails(full) && !hasDetails(e) {
			t.Details++
		}
		out.ClusterConditions = append(out.ClusterConditions, e)
	}
	t.Message = truncationMessage(t, len(c.entries))
	out.Summary.Truncated = &t
	return out
}

// truncationMessage says in words what t counts, for a report of n entries.
func truncationMessage(t appsv1alpha1.ReportTruncation, n int) string {
	var left []string
	if t.Clusters > 0 {
		left = append(left, fmt.Sprintf("%d of its %d cluster entries", t.Clusters, n))
	}
	if t.Conditions > 0 {
		left = append(left, fmt.Sprintf("%d conditions", t.Conditions))
	}
	if t.Resources > 0 {
		left = append(left, fmt.Sprintf("%d resources", t.Resources))
	}
	var did []string
	if len(left) > 0 {
		did = append(did, "leaves out "+joinWords(left))
	}
	if t.Messages > 0 {
		did = append(did, fmt.Sprintf("shortens %d condition messages", t.Messages))
	}
	if t.Details > 0 {
		did = append(did, fmt.Sprintf("omits the revisions and operation state of %d entries", t.Details))
	}
	if len(did) == 0 {
		did = append(did, "cuts nothing it can cut, and still exceeds it")
	}
	msg := fmt.Sprintf("To stay within its budget of %d bytes, the report %s. The summary counts every cluster; "+
		"Synced and Healthy clusters lose detail first, those with errors last.", t.BudgetBytes, joinWords(did))
	return clusterreport.TruncateMessage(msg, maxTruncationMessageBytes)
}

// joinWords joins "a", "b" and "c" as "a, b and c".
func joinWords(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
