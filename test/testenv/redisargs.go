package testenv

import (
	"flag"
	"strings"

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
