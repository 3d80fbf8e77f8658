// Package redisserver runs a real redis-server (and redis-server in Sentinel mode) for the
// tests of what the addon does with Argo CD's Redis: its ACL users, TLS, client
// certificates, databases and Sentinels, which miniredis does not implement. A test
// without redis-server on PATH is skipped.
package redisserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a running redis-server.
type Server struct {
	// Addr is its loopback host:port, TLS or not.
	Addr string
	// Password is its default user's.
	Password string
	// TLS is its TLS configuration; nil without TLS.
	TLS *TLS

	dir     string
	args    []string
	process *process
}

// Options say how to run a redis-server.
type Options struct {
	// Password is the default user's (requirepass); empty: none.
	Password string
	// TLS, when set, makes the server listen with TLS only, with TLS's server
	// certificate.
	TLS *TLS
	// AuthClients is redis.conf's tls-auth-clients: "no", "optional" (the default here)
	// or "yes", which refuses a client without a certificate signed by TLS's CA.
	AuthClients string
	// ReplicaOf, when set, makes the server a replica of that one (without TLS), which it
	// authenticates to with its Password; Start returns once it is in sync.
	ReplicaOf *Server
}

// Start runs a redis-server on a free loopback port until the test ends; it skips the
// test without redis-server.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	args := []string{"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log")}
	if opts.Password != "" {
		args = append(args, "--requirepass", opts.Password)
	}
	if opts.TLS == nil {
		args = append(args, "--port", fmt.Sprint(port))
	} else {
		authClients := opts.AuthClients
		if authClients == "" {
			authClients = "optional"
		}
		args = append(args, "--port", "0", "--tls-port", fmt.Sprint(port), "--tls-cert-file", opts.TLS.ServerCertFile,
			"--tls-key-file", opts.TLS.ServerKeyFile, "--tls-ca-cert-file", opts.TLS.CAFile, "--tls-auth-clients", authClients)
	}
	if m := opts.ReplicaOf; m != nil {
		host, masterPort, _ := net.SplitHostPort(m.Addr)
		args = append(args, "--replicaof", host, masterPort)
		if m.Password != "" {
			args = append(args, "--masterauth", m.Password)
		}
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: opts.Password, TLS: opts.TLS, dir: dir, args: args}
	s.process = run(t, dir, args...)
	s.waitReady(t)
	if opts.ReplicaOf != nil {
		s.waitInSync(t)
	}
	return s
}

// waitInSync waits until a replica's link to its master is up.
func (s *Server) waitInSync(t testing.TB) {
	t.Helper()
	admin := s.Admin(t, 0)
	waitFor(t, "the replica on "+s.Addr+" is not in sync with its master", func(ctx context.Context) error {
		info, err := admin.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("its link is not up:\n%s", info)
		}
		return err
	})
}

// Stop kills the server (SIGKILL, as an OOM kill or a Pod deleted): its port refuses
// connections until Restart.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.process.stop()
}

// Restart kills the server if it runs, and starts it again on the same port, empty, as
// Argo CD's Redis, which keeps nothing on disk, comes back. Its ACL users are gone: set
// them again.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.process.stop()
	s.process = run(t, s.dir, s.args...)
	s.waitReady(t)
}

// Pause stops the server's process (SIGSTOP): it keeps its connections and its data and
// answers nothing, as a Redis behind a network partition, until Resume.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if err := s.process.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume lets a paused server run again.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := s.process.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// Admin returns a client of database db as the default user, with TLS's client
// certificate if the server has TLS; it is closed when the test ends.
func (s *Server) Admin(t testing.TB, db int) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: s.Addr, Password: s.Password, DB: db, DisableIdentity: true, Protocol: 2}
	if s.TLS != nil {
		o.TLSConfig = s.TLS.ClientConfig(t)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// ACLSetUser runs ACL SETUSER user on >password rules... and empties the ACL LOG.
func (s *Server) ACLSetUser(t testing.TB, user, password string, rules []string) {
	t.Helper()
	ctx := context.Background()
	admin := s.Admin(t, 0)
	args := []any{"ACL", "SETUSER", user, "on", ">" + password}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", user, err)
	}
	if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}
}

// ACLLog returns the entries of the ACL LOG: the commands, keys and channels Redis
// refused, and the failed authentications.
func (s *Server) ACLLog(t testing.TB) []any {
	t.Helper()
	entries, err := s.Admin(t, 0).Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	admin := s.Admin(t, 0)
	waitFor(t, "redis-server on "+s.Addr+" does not answer", func(ctx context.Context) error {
		return admin.Ping(ctx).Err()
	})
}

// StartSentinel runs a redis-server in Sentinel mode, without a password of its own, that
// monitors master (with its default user's password) as the group masterName; it
// returns its host:port once it knows the master.
func StartSentinel(t testing.TB, master *Server, masterName string) string {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	host, masterPort, _ := net.SplitHostPort(master.Addr)
	conf := []string{
		"bind 127.0.0.1",
		fmt.Sprintf("port %d", port),
		"dir " + dir,
		"logfile " + filepath.Join(dir, "sentinel.log"),
		fmt.Sprintf("sentinel monitor %s %s %s 1", masterName, host, masterPort),
	}
	if master.Password != "" {
		conf = append(conf, fmt.Sprintf("sentinel auth-pass %s %s", masterName, master.Password))
	}
	confFile := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(confFile, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, dir, confFile, "--sentinel")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: addr, DisableIdentity: true, Protocol: 2})
	defer sentinel.Close()
	waitFor(t, "the Sentinel on "+addr+" does not name the master "+master.Addr, func(ctx context.Context) error {
		got, err := sentinel.GetMasterAddrByName(ctx, masterName).Result()
		if err == nil && net.JoinHostPort(got[0], got[1]) != master.Addr {
			return fmt.Errorf("it names %v", got)
		}
		return err
	})
	return addr
}

// waitFor runs check every 50 ms until it returns nil, for 10 s at the most; then it
// fails t with what and check's last error.
func waitFor(t testing.TB, what string, check func(ctx context.Context) error) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := check(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// process is a running redis-server.
type process struct {
	cmd     *exec.Cmd
	stopped sync.Once
}

func (p *process) stop() {
	p.stopped.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
}

// run runs redis-server with args until the test ends, and logs the files of dir that end
// in .log when the test failed.
func run(t testing.TB, dir string, args ...string) *process {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH: install it (Debian: apt-get install redis-server) to run the test against a real Redis")
	}
	cmd := exec.Command(server, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, l := range logs {
				text, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), text)
			}
		}
	})
	return p
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TLS is a CA, a server certificate for 127.0.0.1 and localhost, and a client
// certificate, all signed by the CA, as PEM files.
type TLS struct {
	CAFile                        string
	ServerCertFile, ServerKeyFile string
	ClientCertFile, ClientKeyFile string
}

// NewTLS makes a CA and its certificates in a temporary directory of the test.
func NewTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert := newCertificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "argocd-pull test Redis CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	parsedCA, err := x509.ParseCertificate(caCert)
	if err != nil {
		t.Fatal(err)
	}
	serverKey, serverCert := newCertificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "redis"}, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, parsedCA, caKey)
	clientKey, clientCert := newCertificate(t, &x509.Certificate{
		Subject:  pkix.Name{CommonName: "argocd-pull"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, parsedCA, caKey)
	files := &TLS{
		CAFile:         writePEM(t, dir, "ca.crt", "CERTIFICATE", caCert),
		ServerCertFile: writePEM(t, dir, "server.crt", "CERTIFICATE", serverCert),
		ServerKeyFile:  writePEM(t, dir, "server.key", "PRIVATE KEY", marshalKey(t, serverKey)),
		ClientCertFile: writePEM(t, dir, "client.crt", "CERTIFICATE", clientCert),
		ClientKeyFile:  writePEM(t, dir, "client.key", "PRIVATE KEY", marshalKey(t, clientKey)),
	}
	return files
}

// ClientConfig trusts the CA and presents the client certificate.
func (f *TLS) ClientConfig(t testing.TB) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cert}}
}

// newCertificate signs template with parentKey as parent (itself when nil), for a day.
func newCertificate(t testing.TB, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber = serial
	template.NotBefore, template.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func marshalKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
