package argocdcache_test

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/redisserver"
)

func TestClientOptionsValidate(t *testing.T) {
	tlsOn := argocdcache.TLSOptions{Enabled: true}
	for _, tc := range []struct {
		name string
		opts argocdcache.ClientOptions
		want string // "" for valid
	}{
		{"address", argocdcache.ClientOptions{Addr: "argocd-redis:6379"}, ""},
		{"Sentinels", argocdcache.ClientOptions{SentinelAddrs: []string{"s-0:26379", "s-1:26379"}, SentinelMaster: "argocd"}, ""},
		{"user and password Secret, DB, TLS with a CA and a client certificate", argocdcache.ClientOptions{Addr: "r:6379", DB: 3,
			Username: "u", PasswordSecret: "s", PasswordKey: "k",
			TLS: argocdcache.TLSOptions{Enabled: true, CAFile: "ca.crt", ClientCertFile: "tls.crt", ClientKeyFile: "tls.key"}}, ""},
		{"nothing to reach", argocdcache.ClientOptions{}, "neither a Redis address nor Sentinels"},
		{"address and Sentinels", argocdcache.ClientOptions{Addr: "r:6379", SentinelAddrs: []string{"s:26379"}, SentinelMaster: "m"},
			"both a Redis address (r:6379) and Sentinels (s:26379)"},
		{"no port", argocdcache.ClientOptions{Addr: "argocd-redis"}, `the Redis address "argocd-redis" is not host:port`},
		{"a Sentinel without a port", argocdcache.ClientOptions{SentinelAddrs: []string{"s:26379", "s1"}, SentinelMaster: "m"}, `"s1" is not host:port`},
		{"no master group", argocdcache.ClientOptions{SentinelAddrs: []string{"s:26379"}}, "Sentinels without the name of their master group"},
		{"negative DB", argocdcache.ClientOptions{Addr: "r:6379", DB: -1}, "the Redis database -1 is negative"},
		{"password Secret without key", argocdcache.ClientOptions{Addr: "r:6379", PasswordSecret: "s"}, "the Redis password Secret s without a key"},
		{"user without password", argocdcache.ClientOptions{Addr: "r:6379", Username: "u"}, `the Redis user "u" without a password Secret`},
		{"CA without TLS", argocdcache.ClientOptions{Addr: "r:6379", TLS: argocdcache.TLSOptions{CAFile: "ca.crt"}}, "without TLS"},
		{"skip verify without TLS", argocdcache.ClientOptions{Addr: "r:6379", TLS: argocdcache.TLSOptions{InsecureSkipVerify: true}}, "without TLS"},
		{"client key without certificate", argocdcache.ClientOptions{Addr: "r:6379", TLS: argocdcache.TLSOptions{Enabled: true, ClientKeyFile: "tls.key"}},
			`a Redis client certificate ("") needs its key ("tls.key")`},
		{"client certificate without key", argocdcache.ClientOptions{Addr: "r:6379", TLS: argocdcache.TLSOptions{Enabled: true, ClientCertFile: "tls.crt"}},
			`a Redis client certificate ("tls.crt") needs its key ("")`},
		{"CA and skip verify", argocdcache.ClientOptions{Addr: "r:6379", TLS: argocdcache.TLSOptions{Enabled: true, CAFile: "ca.crt", InsecureSkipVerify: true}},
			"a Redis CA (ca.crt) with skipping the verification"},
		{"TLS alone", argocdcache.ClientOptions{Addr: "r:6379", TLS: tlsOn}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.want)
			}
			if tc.want != "" {
				if _, err := argocdcache.NewClient(tc.opts, nil); err == nil {
					t.Error("NewClient accepts what Validate refuses")
				}
			}
		})
	}
}

// secretsWith returns a SecretGetter of Argo CD's namespace holding Secret name with
// data key=value.
func secretsWith(name, key, value string) argocdcache.SecretGetter {
	return fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "argocd"},
		Data: map[string][]byte{key: []byte(value)}}).CoreV1().Secrets("argocd")
}

// TestTLS runs a real redis-server that speaks TLS only: the client verifies its
// certificate with the CA file, refuses it when the CA file is another CA's or when it
// falls back to the system's CAs (which never signed it), accepts it unverified with
// InsecureSkipVerify, and gets nowhere without TLS.
func TestTLS(t *testing.T) {
	certs := redisserver.NewTLS(t)
	server := redisserver.Start(t, redisserver.Options{Password: "s3cret", TLS: certs})
	other := redisserver.NewTLS(t)
	secrets := secretsWith(argocdcache.RedisSecret, argocdcache.RedisPasswordKey, "s3cret")
	for _, tc := range []struct {
		name string
		tls  argocdcache.TLSOptions
		want string // the error's, or "" for a PONG
	}{
		{"the CA that signs Redis' certificate", argocdcache.TLSOptions{Enabled: true, CAFile: certs.CAFile}, ""},
		{"another CA", argocdcache.TLSOptions{Enabled: true, CAFile: other.CAFile}, "certificate signed by unknown authority"},
		{"the system's CAs", argocdcache.TLSOptions{Enabled: true}, "certificate signed by unknown authority"},
		{"no verification", argocdcache.TLSOptions{Enabled: true, InsecureSkipVerify: true}, ""},
		{"no TLS", argocdcache.TLSOptions{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, err := argocdcache.NewClient(argocdcache.ClientOptions{Addr: server.Addr, TLS: tc.tls,
				PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey}, secrets)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			err = client.Ping(context.Background()).Err()
			switch {
			case !tc.tls.Enabled:
				// Redis reads the plaintext RESP as a TLS record and drops the connection.
				if err == nil {
					t.Error("PING without TLS to a TLS-only Redis succeeded")
				}
			case tc.want == "" && err != nil:
				t.Errorf("PING: %v", err)
			case tc.want != "":
				var unknown x509.UnknownAuthorityError
				if !errors.As(err, &unknown) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("PING: %v, want %q", err, tc.want)
				}
			}
		})
	}

	// A CA file that holds no certificate, and a client certificate that cannot be read,
	// fail at NewClient, naming the file.
	if _, err := argocdcache.NewClient(argocdcache.ClientOptions{Addr: server.Addr,
		TLS: argocdcache.TLSOptions{Enabled: true, CAFile: certs.ServerKeyFile}}, nil); err == nil || !strings.Contains(err.Error(), certs.ServerKeyFile) {
		t.Errorf("a CA file of no certificate: %v", err)
	}
	if _, err := argocdcache.NewClient(argocdcache.ClientOptions{Addr: server.Addr, TLS: argocdcache.TLSOptions{Enabled: true,
		ClientCertFile: certs.ClientCertFile, ClientKeyFile: "/nonexistent/tls.key"}}, nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/tls.key") {
		t.Errorf("a client key that does not exist: %v", err)
	}
}

// TestTLSClientCertificate runs a real redis-server that requires a client certificate
// signed by its CA (tls-auth-clients yes): the client without one is refused, with its
// certificate and key files it is let in.
func TestTLSClientCertificate(t *testing.T) {
	certs := redisserver.NewTLS(t)
	server := redisserver.Start(t, redisserver.Options{TLS: certs, AuthClients: "yes"})
	ctx := context.Background()
	without, err := argocdcache.NewClient(argocdcache.ClientOptions{Addr: server.Addr,
		TLS: argocdcache.TLSOptions{Enabled: true, CAFile: certs.CAFile}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()
	if err := without.Ping(ctx).Err(); err == nil {
		t.Error("PING without a client certificate to a Redis that requires one succeeded")
	}
	with, err := argocdcache.NewClient(argocdcache.ClientOptions{Addr: server.Addr, TLS: argocdcache.TLSOptions{Enabled: true,
		CAFile: certs.CAFile, ClientCertFile: certs.ClientCertFile, ClientKeyFile: certs.ClientKeyFile}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close()
	if err := with.Ping(ctx).Err(); err != nil {
		t.Errorf("PING with the client certificate: %v", err)
	}
}

// TestDB: a client of database 5 of a real redis-server writes there, not in database 0.
func TestDB(t *testing.T) {
	server := redisserver.Start(t, redisserver.Options{Password: "s3cret"})
	ctx := context.Background()
	client, err := argocdcache.NewClient(argocdcache.ClientOptions{Addr: server.Addr, DB: 5,
		PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey},
		secretsWith(argocdcache.RedisSecret, argocdcache.RedisPasswordKey, "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Set(ctx, "k", "in 5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := server.Admin(t, 5).Get(ctx, "k").Result(); err != nil || got != "in 5" {
		t.Errorf("k in database 5: %q, %v", got, err)
	}
	if n := server.Admin(t, 0).Exists(ctx, "k").Val(); n != 0 {
		t.Error("k is in database 0 too")
	}
}

// TestSentinelFailoverClient: with Sentinels the options make a go-redis failover client,
// as Argo CD's buildFailoverRedisClient does. Against a real Sentinel (redis-server
// --sentinel, without a password) that monitors a real Redis (with one), the client finds
// the master, authenticates to it as the ACL user with the password from its Secret, and
// writes in the database it names.
func TestSentinelFailoverClient(t *testing.T) {
	opts := argocdcache.ClientOptions{SentinelAddrs: []string{"127.0.0.1:1"}, SentinelMaster: "argocd", DB: 2,
		Username: "argocd-pull", PasswordSecret: "argocd-pull-redis", PasswordKey: "password", PoolSize: 3}
	client, err := argocdcache.NewClient(opts, secretsWith("argocd-pull-redis", "password", "user-s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if o := client.Options(); o.Addr != "FailoverClient" || o.DB != 2 || o.PoolSize != 3 || o.CredentialsProviderContext == nil || o.Password != "" {
		t.Errorf("the client's options %+v are not a failover client's of DB 2 with the credentials of the Secret", o)
	}
	if got := opts.Target(); got != "master argocd of the Sentinels 127.0.0.1:1" {
		t.Errorf("Target: %q", got)
	}

	master := redisserver.Start(t, redisserver.Options{Password: "default-s3cret"})
	master.ACLSetUser(t, "argocd-pull", "user-s3cret", []string{"~*", "+@all"})
	opts.SentinelAddrs = []string{redisserver.StartSentinel(t, master, "argocd")}
	client, err = argocdcache.NewClient(opts, secretsWith("argocd-pull-redis", "password", "user-s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	if err := client.Set(ctx, "k", "through the Sentinel", 0).Err(); err != nil {
		t.Fatalf("SET through the Sentinel: %v", err)
	}
	if got, err := master.Admin(t, 2).Get(ctx, "k").Result(); err != nil || got != "through the Sentinel" {
		t.Errorf("k in database 2 of the master: %q, %v", got, err)
	}
	if who, err := client.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "argocd-pull" {
		t.Errorf("the client is %q (%v), want the user argocd-pull", who, err)
	}
	// A wrong password from the Secret is refused by the master, as without Sentinels.
	wrong, err := argocdcache.NewClient(opts, secretsWith("argocd-pull-redis", "password", "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if err := wrong.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("PING with a wrong password through the Sentinel: %v, want WRONGPASS", err)
	}
}

// TestArgsParseBack: the flags that Args renders, parsed by AddFlags' flags, give the
// options back; every option has its flag.
func TestArgsParseBack(t *testing.T) {
	for _, o := range []argocdcache.ClientOptions{
		{},
		{DB: 7, Username: "argocd-pull-agent", PasswordSecret: "argocd-pull-redis", PasswordKey: "password",
			TLS: argocdcache.TLSOptions{Enabled: true, CAFile: "/ca/ca.crt", ClientCertFile: "/c/tls.crt", ClientKeyFile: "/c/tls.key"}},
		{SentinelAddrs: []string{"s-0:26379", "s-1:26379"}, SentinelMaster: "argocd", TLS: argocdcache.TLSOptions{Enabled: true, InsecureSkipVerify: true}},
	} {
		var got argocdcache.ClientOptions
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		got.AddFlags(fs, "")
		if err := fs.Parse(o.Args()); err != nil {
			t.Fatalf("parse %v: %v", o.Args(), err)
		}
		if !reflect.DeepEqual(got, o) {
			t.Errorf("%v parses to\n  %+v\nwant\n  %+v", o.Args(), got, o)
		}
	}
	// Sentinels may also be given comma-separated, in one flag.
	var got argocdcache.ClientOptions
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	got.AddFlags(fs, "")
	if err := fs.Parse([]string{"--argocd-sentinel=s-0:26379,s-1:26379", "--argocd-sentinel=s-2:26379"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"s-0:26379", "s-1:26379", "s-2:26379"}; !reflect.DeepEqual(got.SentinelAddrs, want) {
		t.Errorf("Sentinels %v, want %v", got.SentinelAddrs, want)
	}
}
