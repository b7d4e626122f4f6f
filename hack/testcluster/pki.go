package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its private key, both as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// certSpec says what to put in a certificate issued by a CA.
type certSpec struct {
	commonName   string
	organization []string
	dnsNames     []string
	ips          []net.IP
	server       bool // serverAuth; otherwise clientAuth
}

const certValidity = 365 * 24 * time.Hour

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	// PKCS#8 ("PRIVATE KEY") is read by every client: Go, rustls, OpenSSL.
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func issue(template, parent *x509.Certificate, parentKey crypto.Signer, key *ecdsa.PrivateKey, keyPEM []byte) (*keyPair, error) {
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, key.Public(), parentKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// newCA makes a self-signed certificate authority.
func newCA(name string) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return issue(&x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil, key, keyPEM)
}

// issue makes an end-entity certificate signed by the CA. It is never a CA itself: rustls, like
// any WebPKI client, rejects a CA certificate presented as a server certificate.
func (ca *keyPair) issue(spec certSpec) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if spec.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	now := time.Now()
	return issue(&x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: spec.commonName, Organization: spec.organization},
		DNSNames:              spec.dnsNames,
		IPAddresses:           spec.ips,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		IsCA:                  false,
	}, ca.cert, ca.key, key, keyPEM)
}

// write stores the pair as <dir>/<name>.crt and <dir>/<name>.key and returns both paths.
func (kp *keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err = os.WriteFile(certFile, kp.certPEM, 0o644); err != nil {
		return "", "", err
	}
	if err = os.WriteFile(keyFile, kp.keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// pki holds the paths of everything the components read.
type pki struct {
	caCert, caKey                 string
	servingCert, servingKey       string
	frontProxyCA                  string
	frontProxyCert, frontProxyKey string
	saPublicKey, saPrivateKey     string
	ca                            *keyPair
	// Client certificates, embedded into the kubeconfigs.
	admin, controllerManager, scheduler *keyPair
}

// newPKI writes a fresh PKI to dir: a cluster CA, the API server's serving certificate, client
// certificates for the admin (group system:masters) and the components, a front-proxy CA with its
// client certificate (for aggregated API servers), and the service-account signing key.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{}
	var err error
	fail := func(what string, err error) (*pki, error) {
		return nil, fmt.Errorf("pki: %s: %w", what, err)
	}

	if p.ca, err = newCA("olm-rs-testcluster-ca"); err != nil {
		return fail("cluster CA", err)
	}
	if p.caCert, p.caKey, err = p.ca.write(dir, "ca"); err != nil {
		return fail("cluster CA", err)
	}

	serving, err := p.ca.issue(certSpec{
		commonName: "kube-apiserver",
		dnsNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		ips:    []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, serviceIP},
		server: true,
	})
	if err != nil {
		return fail("serving certificate", err)
	}
	if p.servingCert, p.servingKey, err = serving.write(dir, "apiserver"); err != nil {
		return fail("serving certificate", err)
	}

	if p.admin, err = p.ca.issue(certSpec{commonName: "olm-rs-admin", organization: []string{"system:masters"}}); err != nil {
		return fail("admin certificate", err)
	}
	if p.controllerManager, err = p.ca.issue(certSpec{commonName: "system:kube-controller-manager"}); err != nil {
		return fail("controller-manager certificate", err)
	}
	if p.scheduler, err = p.ca.issue(certSpec{commonName: "system:kube-scheduler"}); err != nil {
		return fail("scheduler certificate", err)
	}

	frontProxyCA, err := newCA("olm-rs-testcluster-front-proxy-ca")
	if err != nil {
		return fail("front-proxy CA", err)
	}
	if p.frontProxyCA, _, err = frontProxyCA.write(dir, "front-proxy-ca"); err != nil {
		return fail("front-proxy CA", err)
	}
	frontProxy, err := frontProxyCA.issue(certSpec{commonName: frontProxyClientName})
	if err != nil {
		return fail("front-proxy client certificate", err)
	}
	if p.frontProxyCert, p.frontProxyKey, err = frontProxy.write(dir, "front-proxy-client"); err != nil {
		return fail("front-proxy client certificate", err)
	}

	saKey, saKeyPEM, err := newKey()
	if err != nil {
		return fail("service-account key", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fail("service-account key", err)
	}
	p.saPrivateKey = filepath.Join(dir, "sa.key")
	p.saPublicKey = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(p.saPrivateKey, saKeyPEM, 0o600); err != nil {
		return fail("service-account key", err)
	}
	if err := os.WriteFile(p.saPublicKey, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}), 0o644); err != nil {
		return fail("service-account key", err)
	}
	return p, nil
}
