package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
)

// serviceAccountIssuer is the issuer of every cluster's service-account tokens, as on a
// kubeadm cluster.
const serviceAccountIssuer = "https://kubernetes.default.svc"

// ControlPlane is one cluster's etcd, kube-apiserver and kube-controller-manager, each a
// process on loopback; on a managed cluster also kube-scheduler and KWOK (startWorkloads).
type ControlPlane struct {
	Name       string
	Dir        string // <run dir>/<name>
	URL        string // the apiserver's https URL
	Kubeconfig string // an admin (system:masters) kubeconfig
	Config     *rest.Config
	Kube       kubernetes.Interface
	// AuditLog is the file of the hub apiserver's audit log of writes (hubAuditPolicy,
	// WritesByWriter); empty on a managed cluster.
	AuditLog string

	ca      *certificateAuthority
	pkiDir  string
	etcdURL string // the plaintext client URL of the cluster's etcd, on loopback

	sup         *supervisor
	apiserverMu sync.Mutex
	apiserver   *process
}

// CAFile is the cluster CA: it signs the apiserver's serving certificate and every client
// certificate the cluster accepts, including the ones kube-controller-manager issues for
// approved CSRs.
func (cp *ControlPlane) CAFile() string { return filepath.Join(cp.pkiDir, "ca.crt") }

func (cp *ControlPlane) pki(name string) string { return filepath.Join(cp.pkiDir, name) }

// baseControllers are the kube-controller-manager controllers every cluster runs: the
// ones a real control plane runs and envtest lacks (garbage collection, namespace deletion,
// CSR signing with the cluster CA, service-account plumbing).
const baseControllers = "garbagecollector,namespace,csrsigning,csrcleaner,serviceaccount,serviceaccount-token,root-ca-cert-publisher,clusterrole-aggregation"

// workloadControllers are the ones that turn workloads into Pods and Pods into endpoints,
// for a cluster that runs Pods (see startWorkloads). nodelifecycle lifts the not-ready
// taint that the apiserver puts on a new Node once the Node is Ready, and watches the
// Nodes' leases.
const workloadControllers = "deployment,replicaset,statefulset,daemonset,job,cronjob,ttl-after-finished,replicationcontroller," +
	"endpoint,endpointslice,endpointslicemirroring,disruption,podgc,nodelifecycle"

// hubControllers are the ones the hub runs on top of the baseControllers: resourcequota
// counts the quotas the addon keeps in each cluster namespace (the agents' status
// slices), without which the apiserver enforces none.
const hubControllers = "resourcequota"

// startControlPlane starts the three processes and returns once the apiserver is ready.
// With workloads, kube-controller-manager also runs the workloadControllers; without, the
// hubControllers.
func startControlPlane(ctx context.Context, sup *supervisor, bin, runDir, name string, workloads bool) (*ControlPlane, error) {
	cp := &ControlPlane{Name: name, Dir: filepath.Join(runDir, name), sup: sup}
	cp.pkiDir = filepath.Join(cp.Dir, "pki")
	if err := cp.writePKI(); err != nil {
		return nil, fmt.Errorf("%s: certificates: %w", name, err)
	}
	ports, err := loopback.FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	cp.etcdURL = "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if _, err := sup.start(processSpec{Name: name + "-etcd", Path: filepath.Join(bin, "etcd"), Args: []string{
		"--name=" + name, "--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=" + cp.etcdURL, "--advertise-client-urls=" + cp.etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + name + "=" + peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
	}}); err != nil {
		return nil, err
	}

	var audit []string
	if !workloads {
		cp.AuditLog = filepath.Join(cp.Dir, "audit.log")
		if audit, err = auditArgs(cp.Dir, cp.AuditLog); err != nil {
			return nil, fmt.Errorf("%s: audit policy: %w", name, err)
		}
	}
	if cp.apiserver, err = sup.start(processSpec{Name: name + "-kube-apiserver", Path: filepath.Join(bin, "kube-apiserver"), Args: append([]string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + cp.pkiDir,
		"--tls-cert-file=" + cp.pki("apiserver.crt"), "--tls-private-key-file=" + cp.pki("apiserver.key"),
		"--client-ca-file=" + cp.CAFile(),
		// The aggregation layer's front proxy, as kubeadm sets it up, so that components
		// that read extension-apiserver-authentication find a request-header CA.
		"--requestheader-client-ca-file=" + cp.CAFile(), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + cp.pki("front-proxy-client.crt"), "--proxy-client-key-file=" + cp.pki("front-proxy-client.key"),
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + cp.pki("sa.key"), "--service-account-signing-key-file=" + cp.pki("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		// KWOK serves the kubelet API of every fake Node on loopback (scheduling.go).
		"--kubelet-preferred-address-types=InternalIP",
		"--v=1",
	}, audit...)}); err != nil {
		return nil, err
	}

	cp.Kubeconfig = filepath.Join(runDir, name+".kubeconfig")
	admin, err := cp.ca.issueClient("fleet-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	if err := writeKubeconfig(cp.Kubeconfig, cp.URL, cp.ca.CertPEM, clientcmdapi.AuthInfo{
		ClientCertificateData: admin.CertPEM, ClientKeyData: admin.KeyPEM,
	}); err != nil {
		return nil, err
	}
	if cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig); err != nil {
		return nil, err
	}
	cp.Config.QPS, cp.Config.Burst = 100, 200
	if cp.Kube, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, sup); err != nil {
		return nil, err
	}

	// kube-controller-manager runs as kubeadm sets it up: as system:kube-controller-manager,
	// each controller with the token of its own service account in kube-system, so that
	// the bootstrap RBAC of each (system:controller:<name>) is what it may do.
	controllers := baseControllers + "," + hubControllers
	if workloads {
		controllers = baseControllers + "," + workloadControllers
	}
	kcmKubeconfig := cp.pki("kube-controller-manager.kubeconfig")
	if err := cp.writeClientKubeconfig(kcmKubeconfig, "system:kube-controller-manager"); err != nil {
		return nil, err
	}
	if _, err := sup.start(processSpec{Name: name + "-kube-controller-manager", Path: filepath.Join(bin, "kube-controller-manager"), Args: []string{
		"--kubeconfig=" + kcmKubeconfig, "--use-service-account-credentials",
		"--controllers=" + controllers,
		"--cluster-signing-cert-file=" + cp.CAFile(), "--cluster-signing-key-file=" + cp.pki("ca.key"),
		"--service-account-private-key-file=" + cp.pki("sa.key"), "--root-ca-file=" + cp.CAFile(),
		"--leader-elect=false", "--secure-port=0",
		"--v=1",
	}}); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) writePKI() error {
	ca, err := newCertificateAuthority(cp.Name + "-ca")
	if err != nil {
		return err
	}
	cp.ca = ca
	serving, err := ca.issueServing("kube-apiserver")
	if err != nil {
		return err
	}
	frontProxy, err := ca.issueClient("front-proxy-client")
	if err != nil {
		return err
	}
	saKey, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	return writeFiles(cp.pkiDir, map[string][]byte{
		"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM,
		"apiserver.crt": serving.CertPEM, "apiserver.key": serving.KeyPEM,
		"front-proxy-client.crt": frontProxy.CertPEM, "front-proxy-client.key": frontProxy.KeyPEM,
		"sa.key": saKey,
	})
}

// waitReady polls /readyz until the apiserver answers ok, or one of the fleet's processes exits.
func (cp *ControlPlane) waitReady(ctx context.Context, sup *supervisor) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := sup.failed(); err != nil {
			return false, err
		}
		body, err := cp.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return string(body) == "ok", nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%s apiserver not ready (last: %w): %w", cp.Name, last, err)
	}
	if err != nil {
		return fmt.Errorf("%s apiserver not ready: %w", cp.Name, err)
	}
	return nil
}

// RestartAPIServer restarts the cluster's kube-apiserver in place, as a rolling restart of
// a control plane would: SIGTERM (SIGKILL after 30 s), then the same binary with the same
// flags, port, certificates and etcd, so that every client's kubeconfig stays valid. It
// returns once the new apiserver answers /readyz ok. Meanwhile clients see their
// connections and watches drop and new connections refused.
//
// When down is not nil, it is called while no apiserver runs, with a client of the
// cluster's etcd: no client of the apiserver sees what down changes happen, and a watch
// resumed on the new apiserver finds its resourceVersion too old and relists. down has a
// minute; the new apiserver starts whether or not it fails, and its error is returned.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down func(ctx context.Context, etcd *clientv3.Client) error) error {
	cp.apiserverMu.Lock()
	defer cp.apiserverMu.Unlock()
	var downErr error
	var whileDown func()
	if down != nil {
		whileDown = func() {
			if err := cp.withEtcd(ctx, down); err != nil {
				downErr = fmt.Errorf("%s: while kube-apiserver was down: %w", cp.Name, err)
			}
		}
	}
	next, err := cp.sup.restart(cp.apiserver, 30*time.Second, whileDown)
	if err != nil {
		return errors.Join(downErr, fmt.Errorf("%s: restart kube-apiserver: %w", cp.Name, err))
	}
	cp.apiserver = next
	return errors.Join(downErr, cp.waitReady(ctx, cp.sup))
}

// withEtcd calls f with a client of the cluster's etcd, for at most a minute.
func (cp *ControlPlane) withEtcd(ctx context.Context, f func(ctx context.Context, etcd *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{cp.etcdURL}, DialTimeout: 5 * time.Second, Context: ctx})
	if err != nil {
		return fmt.Errorf("etcd client for %s: %w", cp.etcdURL, err)
	}
	defer etcd.Close()
	return f(ctx, etcd)
}

// APIServerPid is the process id of the cluster's current kube-apiserver.
func (cp *ControlPlane) APIServerPid() int {
	cp.apiserverMu.Lock()
	defer cp.apiserverMu.Unlock()
	return cp.apiserver.Pid()
}

// IssueClientCertificate signs a client certificate for user and groups with the cluster CA.
func (cp *ControlPlane) IssueClientCertificate(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	kp, err := cp.ca.issueClient(user, groups...)
	if err != nil {
		return nil, nil, err
	}
	return kp.CertPEM, kp.KeyPEM, nil
}

// writeKubeconfig writes a kubeconfig with one cluster, user and context.
func writeKubeconfig(path, server string, caPEM []byte, auth clientcmdapi.AuthInfo) error {
	data, err := kubeconfigBytes(server, caPEM, auth)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func kubeconfigBytes(server string, caPEM []byte, auth clientcmdapi.AuthInfo) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["user"] = &auth
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	cfg.CurrentContext = "default"
	return clientcmd.Write(*cfg)
}
