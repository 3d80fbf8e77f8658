package resourcetree_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/resourcetree"
	"github.com/ocm-gitops/argocd-pull-addon/test/redisserver"
)

// TestTreesComeBackAfterARedisRestart runs the controller as pkg/hub wires it, as the
// manager's ACL user (resourcetree.WriterACLRules), against a real redis-server that keeps
// nothing on disk, as Argo CD's: 20 pulled apps of two clusters have their trees written.
// A Redis that stops answering for a while (SIGSTOP: a network partition) and comes back
// with its data costs no write. A Redis that is killed (an OOM kill, a Pod rolled), while
// one app's slice changes and its write fails, and starts again empty has every tree and
// every app's managed resources back within 10 s, the changed one as it is now, without a
// Warning Event on the apps that did not change; then, settled, the manager writes
// nothing. Redis refuses none of the manager's commands.
func TestTreesComeBackAfterARedisRestart(t *testing.T) {
	clusters := []string{"cluster6", "cluster7"}
	const appsPerCluster = 10
	env, hub := begin(t, clusters...)
	ctx, g, c := hub.Ctx, hub.G, hub.C
	const user, password = "argocd-pull-manager", "manager-s3cret"
	server := redisserver.Start(t, redisserver.Options{Password: "default-s3cret"})
	server.ACLSetUser(t, user, password, resourcetree.WriterACLRules())
	hub.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-manager-redis-restart", Namespace: "argocd"},
		Data: map[string][]byte{"password": []byte(password)}})
	startTreeManager(t, env, treeOptions(argocdcache.ClientOptions{Addr: server.Addr, Username: user,
		PasswordSecret: "argocd-pull-manager-redis-restart", PasswordKey: "password"}))

	var keys []string
	var slices []*statusv1alpha1.ApplicationStatusSlice
	for _, cluster := range clusters {
		addon := hub.EnableAddon(cluster, addonName)
		var apps []statusv1alpha1.AppStatus
		for i := range appsPerCluster {
			name := fmt.Sprintf("%s-app%d", cluster, i)
			hub.Create(hub.Application(name, cluster))
			apps = append(apps, syncedEntry(name,
				[]statusv1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: name, Status: "Synced"}},
				statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Namespace: "web", Name: name + "-0",
					ParentRefs: []statusv1alpha1.ResourceRef{{Kind: "ConfigMap", Namespace: "web", Name: name}}}))
			keys = append(keys, treeKey(name), managedKey(name))
		}
		slices = append(slices, createSlice(hub, addon, apps...))
	}

	admin := server.Admin(t, 0)
	// present counts the apps' trees and managed resources in Redis.
	present := func() int64 {
		n, err := admin.Exists(ctx, keys...).Result()
		if err != nil {
			return -1
		}
		return n
	}
	all := int64(len(keys))
	g.Eventually(present, 30*time.Second).Should(gomega.Equal(all))

	// writes counts the write commands Redis ran (INFO commandstats): the manager's, as
	// the test writes nothing.
	writes := func() int {
		info, err := admin.Info(ctx, "commandstats").Result()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		total := 0
		for line := range strings.SplitSeq(info, "\n") {
			name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
			switch strings.TrimPrefix(name, "cmdstat_") {
			case "set", "expire", "pexpire", "del", "publish":
			default:
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
			n, err := strconv.Atoi(calls)
			g.Expect(ok && err == nil).To(gomega.BeTrue(), line)
			total += n
		}
		return total
	}
	// Settled: the trees are all written, and the controller has checked Redis since.
	time.Sleep(3 * time.Second)
	before := writes()
	time.Sleep(5 * time.Second)
	g.Expect(writes()-before).To(gomega.BeZero(), "writes on a settled fleet")

	t.Run("a Redis unreachable for a while comes back with its data: no write", func(t *testing.T) {
		before := writes()
		server.Pause(t)
		time.Sleep(8 * time.Second) // four checks that find no answer
		server.Resume(t)
		time.Sleep(6 * time.Second) // three checks that find Redis as it was
		g.Expect(writes()-before).To(gomega.BeZero(), "writes after Redis came back with its data")
		g.Expect(present()).To(gomega.Equal(all))
	})

	t.Run("a Redis restarted empty has every tree back within 10 s", func(t *testing.T) {
		warnings := func(g gomega.Gomega) []string {
			events := &eventsv1.EventList{}
			g.Expect(c.List(ctx, events, client.InNamespace("argocd"))).To(gomega.Succeed())
			var apps []string
			for _, e := range events.Items {
				if e.Reason == resourcetree.ReasonNotWritten && (strings.HasPrefix(e.Regarding.Name, "cluster6-") || strings.HasPrefix(e.Regarding.Name, "cluster7-")) {
					apps = append(apps, e.Regarding.Name)
				}
			}
			return apps
		}
		// Down, and one app scaled meanwhile: its write fails.
		server.Stop(t)
		slice := slices[0]
		changed := &slice.Apps[0]
		changed.Nodes = append(changed.Nodes, statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Namespace: "web", Name: changed.Name + "-1",
			ParentRefs: []statusv1alpha1.ResourceRef{{Kind: "ConfigMap", Namespace: "web", Name: changed.Name}}})
		g.Expect(c.Update(ctx, slice)).To(gomega.Succeed())
		g.Eventually(warnings).Should(gomega.Equal([]string{changed.Name}))

		server.Restart(t)
		restarted := time.Now()
		server.ACLSetUser(t, user, password, resourcetree.WriterACLRules()) // as Redis' configuration gives it at start
		g.Eventually(present, 10*time.Second, 100*time.Millisecond).Should(gomega.Equal(all), "the trees are not back")
		t.Logf("every tree and managed resources of %d apps back %v after Redis restarted", len(keys)/2, time.Since(restarted).Round(10*time.Millisecond))
		raw, err := admin.Get(ctx, treeKey(changed.Name)).Bytes()
		g.Expect(decodeTree(g, raw, err).Nodes).To(gomega.HaveLen(3), "the changed app's tree, as it is now")
		g.Expect(warnings(g)).To(gomega.Equal([]string{changed.Name}), "Warning Events on apps whose write never failed")

		time.Sleep(3 * time.Second)
		before := writes()
		time.Sleep(5 * time.Second)
		g.Expect(writes()-before).To(gomega.BeZero(), "writes once the trees are back")
		g.Expect(server.ACLLog(t)).To(gomega.BeEmpty(), "Redis refused the manager's user")
	})
}
