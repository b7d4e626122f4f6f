package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

const (
	// Service and Pod address ranges; nothing routes them (the nodes are fake), they only must not overlap.
	serviceCIDR          = "10.96.0.0/16"
	podCIDR              = "10.244.0.0/16"
	frontProxyClientName = "front-proxy-client"
	contextName          = "olm-rs-testcluster"
	// Nodes with this annotation are the ones kwok plays the kubelet for.
	fakeNodeAnnotation = "kwok.x-k8s.io/node"

	// nodeLeaseDuration is what kwok writes into each fake node's Lease in kube-node-lease; like
	// the kubelet, it renews the Lease every quarter of that (10 s). kwok holds no Leases unless
	// told a duration, and then the nodes only heartbeat through their status, every few minutes.
	nodeLeaseDuration = 40 * time.Second
	// nodeMonitorGracePeriod is how long the node lifecycle controller waits for a heartbeat before
	// it marks a node NotReady (and with it the node's Pods). It is Kubernetes' default, stated here
	// because it must stay well above the Lease renewal interval.
	nodeMonitorGracePeriod = 50 * time.Second
	// maxLeaseAge is the oldest renewal a healthy node's Lease may show: a Lease not renewed within
	// its duration has expired.
	maxLeaseAge = nodeLeaseDuration
)

// serviceIP is the first address of serviceCIDR: the `kubernetes` Service.
var serviceIP = net.IPv4(10, 96, 0, 1)

type cluster struct {
	kubeconfig string                // admin kubeconfig
	server     string                // API server URL
	client     *kubernetes.Clientset // admin client
	// A second kube-apiserver on the same etcd, for clients that fail over between servers.
	// The other components use only the first.
	kubeconfig2 string
	server2     string
	client2     *kubernetes.Clientset
}

// secondAPIServer is the supervisor's name of the second kube-apiserver.
const secondAPIServer = "kube-apiserver-2"

// start brings every component up in dependency order and waits until the cluster can run Pods.
func start(parent context.Context, cfg config, sup *supervisor) (*cluster, error) {
	ctx, cancel := context.WithTimeout(parent, cfg.timeout)
	defer cancel()

	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	etcdPeerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	apiPort := ports[2]
	c := &cluster{
		kubeconfig:  filepath.Join(cfg.dir, "kubeconfig"),
		server:      fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		kubeconfig2: filepath.Join(cfg.dir, "kubeconfig-2"),
		server2:     fmt.Sprintf("https://127.0.0.1:%d", ports[3]),
	}

	pkiDir := filepath.Join(cfg.dir, "pki")
	p, err := newPKI(pkiDir)
	if err != nil {
		return nil, err
	}
	kcmKubeconfig := filepath.Join(pkiDir, "kube-controller-manager.kubeconfig")
	schedulerKubeconfig := filepath.Join(pkiDir, "kube-scheduler.kubeconfig")
	for _, kc := range []struct {
		path string
		user *keyPair
	}{
		{c.kubeconfig, p.admin},
		{kcmKubeconfig, p.controllerManager},
		{schedulerKubeconfig, p.scheduler},
	} {
		if err := writeKubeconfig(kc.path, c.server, p.ca.certPEM, kc.user); err != nil {
			return nil, err
		}
	}
	if err := writeKubeconfig(c.kubeconfig2, c.server2, p.ca.certPEM, p.admin); err != nil {
		return nil, err
	}

	// Both API servers share etcd, certificates and flags; only the port differs.
	apiserverArgs := func(port int) []string {
		return []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			// The default reconciler would publish 127.0.0.1 as the `kubernetes` Service endpoint,
			// which the API rejects.
			"--endpoint-reconciler-type=none",
			"--tls-cert-file=" + p.servingCert,
			"--tls-private-key-file=" + p.servingKey,
			"--client-ca-file=" + p.caCert,
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p.saPublicKey,
			"--service-account-signing-key-file=" + p.saPrivateKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--allow-privileged=true",
			"--profiling=false",
			// Front proxy, so that aggregated API servers can be registered.
			"--requestheader-client-ca-file=" + p.frontProxyCA,
			"--requestheader-allowed-names=" + frontProxyClientName,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + p.frontProxyCert,
			"--proxy-client-key-file=" + p.frontProxyKey,
		}
	}

	if _, err := sup.start("etcd",
		"--name=testcluster",
		"--data-dir="+filepath.Join(cfg.dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+etcdPeerURL,
		"--initial-advertise-peer-urls="+etcdPeerURL,
		"--initial-cluster=testcluster="+etcdPeerURL,
		// Test data is disposable: skipping fsync makes every write much cheaper.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "etcd is healthy", 200*time.Millisecond, etcdHealthy(etcdURL)); err != nil {
		return nil, err
	}

	if _, err := sup.start("kube-apiserver", apiserverArgs(apiPort)...); err != nil {
		return nil, err
	}
	client, err := clientFor(c.kubeconfig)
	if err != nil {
		return nil, err
	}
	c.client = client
	if err := waitFor(ctx, "kube-apiserver is ready", 250*time.Millisecond, apiserverReady(client)); err != nil {
		return nil, err
	}
	// The second server starts now and gets ready while the rest comes up.
	if _, err := sup.start(secondAPIServer, apiserverArgs(ports[3])...); err != nil {
		return nil, err
	}
	if c.client2, err = clientFor(c.kubeconfig2); err != nil {
		return nil, err
	}

	if _, err := sup.start("kube-controller-manager",
		"--kubeconfig="+kcmKubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		// Each controller gets its own ServiceAccount and RBAC role, as in a kubeadm cluster.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.saPrivateKey,
		"--root-ca-file="+p.caCert,
		"--cluster-signing-cert-file="+p.caCert,
		"--cluster-signing-key-file="+p.caKey,
		"--service-cluster-ip-range="+serviceCIDR,
		"--node-monitor-grace-period="+nodeMonitorGracePeriod.String(),
	); err != nil {
		return nil, err
	}
	if _, err := sup.start("kube-scheduler",
		"--kubeconfig="+schedulerKubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	); err != nil {
		return nil, err
	}
	kwokConfig := filepath.Join(cfg.dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, []byte(kwokStages()), 0o644); err != nil {
		return nil, err
	}
	if _, err := sup.start("kwok",
		"--kubeconfig="+c.kubeconfig,
		"--config="+kwokConfig,
		"--manage-nodes-with-annotation-selector="+fakeNodeAnnotation+"=fake",
		"--cidr="+podCIDR,
		"--node-lease-duration-seconds="+strconv.Itoa(int(nodeLeaseDuration.Seconds())),
	); err != nil {
		return nil, err
	}

	for i := range cfg.nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, fakeNode(fmt.Sprintf("kwok-node-%d", i)), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create fake node: %w", err)
		}
	}
	if err := waitFor(ctx, fmt.Sprintf("%d fake nodes are Ready and hold a Lease", cfg.nodes), 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := checkNodes(ctx, client, cfg.nodes, maxLeaseAge)
		return err == nil, err
	}); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "the second kube-apiserver is ready", 250*time.Millisecond, apiserverReady(c.client2)); err != nil {
		return nil, err
	}
	// Pods can only be created once the namespace's `default` ServiceAccount exists.
	if err := waitFor(ctx, "ServiceAccount default/default exists", 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// toggleSecondAPIServer stops the second kube-apiserver when it runs (an outage of one server
// of two), and starts it again and waits until it is ready when it is stopped.
func (c *cluster) toggleSecondAPIServer(ctx context.Context, sup *supervisor) (running bool, err error) {
	stopped, err := sup.toggle(secondAPIServer, 3*time.Second)
	if err != nil || stopped {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return true, waitFor(ctx, "the second kube-apiserver is ready again", 250*time.Millisecond, apiserverReady(c.client2))
}

// restartAPIServer stops kube-apiserver and starts it again, as an outage would, and waits until it is
// ready again. Clients see their connections and watches break; the other components reconnect.
func (c *cluster) restartAPIServer(ctx context.Context, sup *supervisor) error {
	// An outage need not be graceful: what has not stopped after a few seconds is killed.
	if err := sup.restart("kube-apiserver", 3*time.Second); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return waitFor(ctx, "kube-apiserver is ready again", 250*time.Millisecond, apiserverReady(c.client))
}

func writeKubeconfig(path, server string, caPEM []byte, user *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user.cert.Subject.CommonName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: user.certPEM,
		ClientKeyData:         user.keyPEM,
	}
	cfg.Contexts[contextName] = &clientcmdapi.Context{
		Cluster:   contextName,
		AuthInfo:  user.cert.Subject.CommonName,
		Namespace: metav1.NamespaceDefault,
	}
	cfg.CurrentContext = contextName
	return clientcmd.WriteToFile(*cfg, path)
}

func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	rc.UserAgent = "olm-rs-testcluster"
	return kubernetes.NewForConfig(rc)
}

func etcdHealthy(url string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			return false, fmt.Errorf("etcd /health: %s: %s", resp.Status, body)
		}
		return true, nil
	}
}

func apiserverReady(client *kubernetes.Clientset) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Errorf("%w %s", err, body)
		}
		return strings.TrimSpace(string(body)) == "ok", nil
	}
}

// kwokStages is kwok's configuration: the stages that play the kubelet, as published by kwok.
// Nodes become Ready, and their status is refreshed every few minutes (the heartbeat that keeps
// them Ready is their Lease, which kwok renews on its own: --node-lease-duration-seconds). Pods
// become Running and Ready, Pods of finished containers complete, and deleted Pods are removed
// (otherwise they stay Terminating and block namespace deletion).
func kwokStages() string {
	stages := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, s := range stages {
		stages[i] = strings.TrimSpace(s)
	}
	return strings.Join(stages, "\n---\n") + "\n"
}

// fakeNode is a Node for kwok to manage, shaped like the nodes kwokctl creates.
func fakeNode(name string) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				fakeNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"type":                          "kwok",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/os":              "linux",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
			},
		},
		Status: corev1.NodeStatus{
			Allocatable: resources,
			Capacity:    resources,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    "amd64",
				OperatingSystem: "linux",
			},
		},
	}
}
