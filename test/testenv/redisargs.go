package testenv

import (
	"flag"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// RedisOptionsFromArgs returns the Redis options that a container's args give, parsed by
// the flags the binaries themselves register (--argocd-redis and
// argocdcache.ClientOptions.AddFlags), from defaults; the args of other flags are left
// out. It also returns the args it read.
func RedisOptionsFromArgs(args []string, defaults argocdcache.ClientOptions) (argocdcache.ClientOptions, []string, error) {
	got := defaults
	fs := flag.NewFlagSet("redis", flag.ContinueOnError)
	fs.StringVar(&got.Addr, "argocd-redis", got.Addr, "")
	got.AddFlags(fs, "")
	var redisArgs []string
	for _, arg := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if fs.Lookup(name) != nil {
			redisArgs = append(redisArgs, arg)
		}
	}
	err := fs.Parse(redisArgs)
	return got, redisArgs, err
}

// ExpectRedisOptions checks the Redis options that the first container of pod, the
// whose (manager, agent), gets from its args (RedisOptionsFromArgs, from defaults): they
// are want, they are valid, and the files they name (the CA, the client certificate and
// key) are in the volumes, each "configMap <name>" or "secret <name>".
func ExpectRedisOptions(t *testing.T, whose string, pod corev1.PodSpec, defaults, want argocdcache.ClientOptions, volumes []string) {
	t.Helper()
	got, redisArgs, err := RedisOptionsFromArgs(pod.Containers[0].Args, defaults)
	if err != nil {
		t.Fatalf("the %s's Redis flags %v: %v", whose, redisArgs, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the %s's Redis options from %v:\n  %+v\nwant\n  %+v", whose, redisArgs, got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the %s's Redis options are not valid: %v", whose, err)
	}
	var gotVolumes []string
	for _, file := range []string{got.TLS.CAFile, got.TLS.ClientCertFile, got.TLS.ClientKeyFile} {
		if file != "" {
			gotVolumes = append(gotVolumes, volumeOf(t, pod, file))
		}
	}
	if !slices.Equal(gotVolumes, volumes) {
		t.Errorf("the Redis files are in the volumes %v, want %v", gotVolumes, volumes)
	}
}

// volumeOf returns the source of the volume that holds file in pod's container:
// "configMap <name>" or "secret <name>".
func volumeOf(t *testing.T, pod corev1.PodSpec, file string) string {
	t.Helper()
	for _, m := range pod.Containers[0].VolumeMounts {
		if filepath.Dir(file) != m.MountPath {
			continue
		}
		for _, v := range pod.Volumes {
			switch {
			case v.Name != m.Name:
			case v.ConfigMap != nil:
				return "configMap " + v.ConfigMap.Name
			case v.Secret != nil:
				return "secret " + v.Secret.SecretName
			}
		}
	}
	t.Errorf("no volume holds %s", file)
	return ""
}
