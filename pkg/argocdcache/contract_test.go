package argocdcache_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestArgoCDCacheContract checks everything of this package against the source of the
// Argo CD the fleet runs and the project supports (hack/tools/argocd pins it). An upgrade
// of Argo CD that changes a key, the cache version, the default compression or
// expiration, the encoding, the password Secret, what argocd-server reads, or the JSON
// of a tree or of the managed resources fails here, naming what changed: this package,
// its readers and writers (pkg/spoke, pkg/hub/resourcetree) and docs/design.md (sections
// 3.4 and 2.6) must then follow.
func TestArgoCDCacheContract(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	argoDir := filepath.Join(root, "hack/tools/argocd")
	argo, err := fleet.ModuleDir(argoDir, "github.com/argoproj/argo-cd/v3")
	if err != nil {
		t.Fatal(err)
	}
	goRedisCache, err := fleet.ModuleDir(argoDir, "github.com/go-redis/cache/v9")
	if err != nil {
		t.Fatal(err)
	}
	read := func(dir, rel string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatalf("the pinned source has no %s: %v", rel, err)
		}
		return string(data)
	}
	common := read(argo, "common/common.go")
	appstate := read(argo, "util/cache/appstate/cache.go")
	cache := read(argo, "util/cache/cache.go")
	redisCache := read(argo, "util/cache/redis.go")
	types := read(argo, "pkg/apis/application/v1alpha1/types.go")
	controller := read(argo, "controller/appcontroller.go")
	server := read(argo, "server/application/application.go")
	serverCache := read(argo, "server/cache/cache.go")
	storedBytes := read(goRedisCache, "cache.go")

	q := regexp.QuoteMeta
	for _, c := range []struct {
		what, source, pattern string
	}{
		// Keys.
		{"the cache version", common, `CacheVersion\s*=\s*"` + q(argocdcache.CacheVersion) + `"`},
		{"the cache version suffix", cache, `return fmt.Sprintf\("%s\|%s", key, common.CacheVersion\)`},
		{"the tree key", appstate, `key := "` + q(argocdcache.TreeKeyPrefix) + `" \+ appName`},
		{"the tree shard suffix", appstate, `key = fmt.Sprintf\("%s\|%d", key, shard\)`},
		{"the managed resources key and notification channel", appstate, `return "` + q(argocdcache.ManagedResourcesKeyPrefix) + `" \+ appName`},
		{"the notification after a tree write", appstate, `return c.Cache.NotifyUpdated\(appManagedResourcesKey\(appName\)\)`},
		{"the notification is published on the full key", redisCache, `r.client.Publish\(context.TODO\(\), key, ""\)`},
		{"the trees are keyed by instance name", controller, `ctrl.cache.SetAppResourcesTree\(a.InstanceName\(ctrl.namespace\), tree\)`},
		{"the managed resources are keyed by instance name", controller, `ctrl.cache.SetAppManagedResources\(a.InstanceName\(ctrl.namespace\), `},
		{"the instance name", types, `return app.Namespace \+ "_" \+ app.Name`},
		// Values.
		{"the gzip suffix", redisCache, `return key \+ "` + q(argocdcache.GzipSuffix) + `"`},
		{"gzip by default", cache, `"REDIS_COMPRESSION", string\(RedisCompressionGZip\)`},
		{"the compression names", redisCache, `RedisCompressionNone RedisCompressionType = "` + string(argocdcache.CompressionNone) + `"\s+RedisCompressionGZip RedisCompressionType = "` + string(argocdcache.CompressionGzip) + `"`},
		{"JSON with json.Encoder", redisCache, `encoder := json.NewEncoder\(w\)`},
		{"gzip of the JSON", redisCache, `w = gzip.NewWriter\(buf\)`},
		{"the encoded bytes go to go-redis/cache as they are", redisCache, `Value: val,`},
		{"go-redis/cache stores bytes as they are", storedBytes, `case \[\]byte:\s+return value, nil`},
		{"the app state expiration", appstate, `"ARGOCD_APP_STATE_CACHE_EXPIRATION", 1\*time.Hour`},
		{"the managed resources in FullName order", appstate, `return managedResources\[i\].FullName\(\) < managedResources\[j\].FullName\(\)`},
		// The password.
		{"the password Secret", common, `RedisInitialCredentials\s*=\s*"` + argocdcache.RedisSecret + `"`},
		{"the password key", common, `RedisInitialCredentialsKey\s*=\s*"` + argocdcache.RedisPasswordKey + `"`},
		// What argocd-server reads, and that the hub controller writes nothing for a
		// pulled app (skip-reconcile).
		{"argocd-server reads the tree", server, `s.cache.GetAppResourcesTree\(a.InstanceName\(s.ns\), &tree\)`},
		{"argocd-server reads the managed resources", server, `s.cache.GetAppManagedResources\(a.InstanceName\(s.ns\), &items\)`},
		{"argocd-server's tree watch listens to the notification", server, `s.cache.OnAppResourcesTreeChanged\(ws.Context\(\), cacheKey, func\(\) error`},
		{"argocd-server reads through appstate", serverCache, `return c.cache.GetAppResourcesTree\(appName, res\)`},
		{"the application-controller skips skip-reconcile apps", controller, `AnnotationKeyAppSkipReconcile\]; ok`},
		// JSON.
		{"tree nodes", types, "Nodes \\[\\]ResourceNode `json:\"nodes,omitempty\""},
		{"tree shards", types, "ShardsCount int64 `json:\"shardsCount,omitempty\""},
		{"node identity", types, "ResourceRef `json:\",inline\""},
		{"node parents", types, "ParentRefs \\[\\]ResourceRef `json:\"parentRefs,omitempty\""},
		{"node images", types, "Images \\[\\]string `json:\"images,omitempty\""},
		{"node health", types, "Health \\*HealthStatus `json:\"health,omitempty\""},
		{"health status", types, "Status health.HealthStatusCode `json:\"status,omitempty\""},
		{"health message", types, "Message string `json:\"message,omitempty\" protobuf:\"bytes,2,opt,name=message\"`"},
		{"managed resources", appstate, `SetAppManagedResources\(appName string, managedResources \[\]\*appv1.ResourceDiff\)`},
		{"managed resource hook", types, "Hook bool `json:\"hook,omitempty\""},
		{"managed resource modified", types, "Modified bool `json:\"modified,omitempty\""},
	} {
		if !regexp.MustCompile(c.pattern).MatchString(c.source) {
			t.Errorf("Argo CD changed %s: the pinned source no longer matches %s", c.what, c.pattern)
		}
	}
	for _, field := range []string{"group", "version", "kind", "namespace", "name", "uid"} {
		if !strings.Contains(types, "`json:\""+field+",omitempty\" protobuf:") {
			t.Errorf("Argo CD's ResourceRef has no JSON field %q any more", field)
		}
	}
	for _, field := range []string{"targetState", "liveState", "normalizedLiveState", "predictedLiveState"} {
		if !strings.Contains(types, field+" string `json:\""+field+",omitempty\"") && !strings.Contains(types, "`json:\""+field+",omitempty\" protobuf:") {
			t.Errorf("Argo CD's ResourceDiff has no JSON field %q any more", field)
		}
	}
}
