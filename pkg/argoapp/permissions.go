package argoapp

// This file holds Argo CD's permission rules that the hub applies to a pulled
// Application before it leaves the hub: its AppProject's rules and the override-only
// fields of an operation.

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gobwas/glob"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// InClusterName is the name Argo CD gives the cluster it runs in, whose server is
// InClusterServer.
const InClusterName = "in-cluster"

// ProjectPermitsSources returns the repository URLs of spec that the AppProject's
// spec.sourceRepos does not permit, as Argo CD decides it (AppProject.IsSourcePermitted
// in Argo CD v3.2: URLs normalized, glob patterns with '/' as separator, a "!" pattern
// that does not match denies).
func ProjectPermitsSources(project *unstructured.Unstructured, spec Spec) []string {
	patterns, _, _ := unstructured.NestedStringSlice(project.Object, "spec", "sourceRepos")
	sources := spec.Sources
	if !spec.IsMultiSource() && spec.Source != nil {
		sources = []Source{*spec.Source}
	}
	var denied []string
	for _, s := range sources {
		if !sourcePermitted(patterns, s.RepoURL) {
			denied = append(denied, s.RepoURL)
		}
	}
	return denied
}

func sourcePermitted(patterns []string, repoURL string) bool {
	normalizedURL := normalizeGitURL(repoURL)
	matchedAny := false
	for _, pattern := range patterns {
		deny := strings.HasPrefix(pattern, "!")
		normalized := normalizeGitURL(strings.TrimPrefix(pattern, "!"))
		if deny {
			normalized = "!" + normalized
		}
		switch matched := globMatch(normalized, normalizedURL, '/'); {
		case matched:
			matchedAny = true
		case deny:
			return false
		}
	}
	return matchedAny
}

// ProjectPermitsDestination reports whether the AppProject's spec.destinations permit
// an Application's destination, as Argo CD decides it (AppProject.isDestinationMatched
// in Argo CD v3.2). Argo CD matches both the name and the server of the destination's
// cluster, which it looks up in its cluster Secrets; here the in-cluster pair is
// known, and for any other cluster only what the destination names is matched, so a
// project that permits a cluster only by the other of the two is refused: the safe side.
func ProjectPermitsDestination(project *unstructured.Unstructured, d Destination) bool {
	name, server := d.Name, d.Server
	switch {
	case server == InClusterServer && name == "":
		name = InClusterName
	case name == InClusterName && server == "":
		server = InClusterServer
	}
	items, _, _ := unstructured.NestedSlice(project.Object, "spec", "destinations")
	matchedAny := false
	for _, item := range items {
		m, _ := item.(map[string]any)
		itemName, _ := m["name"].(string)
		itemServer, _ := m["server"].(string)
		itemNamespace, _ := m["namespace"].(string)
		nameMatched := name != "" && globMatch(itemName, name)
		serverMatched := server != "" && globMatch(itemServer, server)
		namespaceMatched := globMatch(itemNamespace, d.Namespace)
		switch {
		case (serverMatched || nameMatched) && namespaceMatched:
			matchedAny = true
		case (!nameMatched && strings.HasPrefix(itemName, "!")) || (!serverMatched && strings.HasPrefix(itemServer, "!")) && namespaceMatched:
			return false
		case !namespaceMatched && strings.HasPrefix(itemNamespace, "!") && serverMatched:
			return false
		}
	}
	return matchedAny
}

// globMatch is Argo CD's glob match with negation: a pattern "!p" matches what p does not.
func globMatch(pattern, value string, separators ...rune) bool {
	if strings.HasPrefix(pattern, "!") {
		return !compiledMatch(pattern[1:], value, separators...)
	}
	if pattern == "*" {
		return true
	}
	return compiledMatch(pattern, value, separators...)
}

func compiledMatch(pattern, value string, separators ...rune) bool {
	g, err := glob.Compile(pattern, separators...)
	return err == nil && g.Match(value)
}

// scpLikeURL matches git's user@host:path form, which Argo CD reads as SSH.
var scpLikeURL = regexp.MustCompile(`^(ssh://)?([^/:]*?)@[^@]+$`)

// normalizeGitURL is Argo CD's NormalizeGitURL (util/git, v3.2): lower case, SSH URLs in
// one form, no ".git" suffix; "" for what does not parse.
func normalizeGitURL(repo string) string {
	repo = strings.ToLower(strings.TrimSpace(repo))
	if scpLikeURL.MatchString(repo) && !strings.HasPrefix(repo, "ssh://") {
		repo = "ssh://" + strings.Replace(repo, ":", "/", 1)
	}
	repo = strings.TrimSuffix(repo, ".git")
	u, err := url.Parse(repo)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.String(), "ssh://")
}

// DestinationString names a destination for a message.
func DestinationString(d Destination) string {
	cluster := d.Server
	if d.Name != "" {
		cluster = d.Name
	}
	return fmt.Sprintf("cluster %q, namespace %q", cluster, d.Namespace)
}

// HasInlineManifests reports whether the Application's .operation.sync carries inline
// manifests (argocd app sync --local), which argocd-server accepts only from a user with
// the applications' override permission (Server.Sync in Argo CD v3.2).
func HasInlineManifests(app *unstructured.Unstructured) bool {
	manifests, found, _ := unstructured.NestedFieldNoCopy(app.Object, "operation", "sync", "manifests")
	if !found || manifests == nil {
		return false
	}
	list, ok := manifests.([]any)
	return !ok || len(list) > 0
}

// OperationSourcesNotPermitted returns the repository URLs of the sources that an
// Application's .operation.sync names (sync.source, sync.sources) which the hub may not
// let through: with project, the hub AppProject of the Application, those its
// spec.sourceRepos does not permit (ProjectPermitsSources); without one (the hub has no
// AppProject of that name), those that the Application's own spec does not name. Nil for
// an operation that names no source: a sync of the spec's sources.
//
// A sync names sources only by `argocd app rollback`: argocd-server's Rollback copies
// them from the chosen entry of status.history, which on a pulled app the status mirror
// writes from the managed cluster's agent. Argo CD trusts them (its controller writes
// the history of a pushed app) and checks them nowhere: argocd-server's Rollback does not,
// and the application-controller checks the project's source repositories against the
// spec only (util/argo ValidatePermissions, v3.2), not against the operation it syncs.
// So the manager checks them before it delivers the operation: else an agent's forged
// history entry would let a hub user's rollback deploy, on its cluster, from a
// repository that the Application's project does not permit; and so would a hub user who
// may patch the Application and writes such an operation by hand.
func OperationSourcesNotPermitted(app, project *unstructured.Unstructured) []string {
	sources := operationSources(app)
	if len(sources) == 0 {
		return nil
	}
	if project != nil {
		return ProjectPermitsSources(project, Spec{Sources: sources})
	}
	spec, _ := DecodeSpec(app)
	named := map[string]bool{}
	if spec.Source != nil {
		named[normalizeGitURL(spec.Source.RepoURL)] = true
	}
	for _, s := range spec.Sources {
		named[normalizeGitURL(s.RepoURL)] = true
	}
	var denied []string
	for _, s := range sources {
		if !named[normalizeGitURL(s.RepoURL)] {
			denied = append(denied, s.RepoURL)
		}
	}
	return denied
}

// operationSources returns the sources of .operation.sync that name a repository
// (argocd-server's Rollback sets sync.source, empty, for a multi-source entry too).
func operationSources(app *unstructured.Unstructured) []Source {
	sync, _, _ := unstructured.NestedMap(app.Object, "operation", "sync")
	var r fieldReader
	var out []Source
	if source := r.object(sync, ".operation.sync", "source"); source != nil {
		out = append(out, r.source(source, ".operation.sync.source"))
	}
	for i, item := range r.list(sync, ".operation.sync", "sources") {
		path := ".operation.sync.sources[" + strconv.Itoa(i) + "]"
		out = append(out, r.source(r.element(item, path), path))
	}
	if r.err != nil {
		// A source the decoder cannot read names no repository it can check: refuse it
		// as one that is not permitted.
		return []Source{{RepoURL: "(unreadable: " + r.err.Error() + ")"}}
	}
	return slices.DeleteFunc(out, func(s Source) bool { return s.RepoURL == "" })
}
