// Package localca keeps the certificates of a server that one user runs for themself (the
// Temporal server `clusterflow dev` embeds): a CA of its own, a server certificate for the
// names the server is reached by, and a client certificate, in a folder that is the user's
// alone. Whoever cannot read the folder (a member's script, which runs as a user of its
// cluster's) cannot reach the server, which demands a client certificate of this CA.
// EnsureStack does the same for a stack of services (docker-compose.yml's): a folder per
// part, each its own user's.
package localca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
)

// Files are the PEM files of a folder's CA and certificates.
type Files struct {
	Dir                   string
	CA, CAKey             string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// ServerName is the name clients verify the server certificate by: it is always among
// its names, whatever address the server listens on.
const ServerName = "localhost"

// Lifetimes: a CA outlives many server and client certificates, which are made again a
// month before they end (the next time Ensure runs).
const (
	caLifetime    = 10 * 365 * 24 * time.Hour
	leafLifetime  = 2 * 365 * 24 * time.Hour
	renewalMargin = 30 * 24 * time.Hour
)

// FilesIn names the files of dir.
func FilesIn(dir string) Files {
	f := func(name string) string { return filepath.Join(dir, name) }
	return Files{Dir: dir, CA: f("ca.pem"), CAKey: f("ca-key.pem"), ServerCert: f("server.pem"), ServerKey: f("server-key.pem"),
		ClientCert: f("client.pem"), ClientKey: f("client-key.pem")}
}

// Ensure makes dir (mode 0700, checked to be this user's alone) and what it lacks: the CA,
// a server certificate for localhost and hosts (names or IP addresses), and a client
// certificate. Certificates near their end, or a server certificate lacking one of hosts,
// are made again; the CA stays, so that clients keep trusting it.
func Ensure(dir string, hosts []string) (Files, error) {
	files := FilesIn(dir)
	if err := atomicfile.PrivateDir(dir); err != nil {
		return files, fmt.Errorf("certificates' folder %s: %w", dir, err)
	}
	ca, caKey, err := loadPair(files.CA, files.CAKey)
	if err != nil || time.Until(ca.NotAfter) < renewalMargin {
		if ca, caKey, err = newCA(files); err != nil {
			return files, err
		}
	}
	names := append([]string{ServerName, "127.0.0.1", "::1"}, hosts...)
	server, _, err := loadPair(files.ServerCert, files.ServerKey)
	if err != nil || !current(server, ca) || !coversAll(server, names) {
		// Both key usages: the server's own system workers present it as their client
		// certificate.
		if err := issue(files.ServerCert, files.ServerKey, ca, caKey, leaf("clusterflow dev server", names,
			x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)); err != nil {
			return files, err
		}
	}
	client, _, err := loadPair(files.ClientCert, files.ClientKey)
	if err != nil || !current(client, ca) {
		if err := issue(files.ClientCert, files.ClientKey, ca, caKey, leaf("clusterflow dev client", nil, x509.ExtKeyUsageClientAuth)); err != nil {
			return files, err
		}
	}
	return files, nil
}

// current says the certificate is of this CA and not near its end.
func current(cert, ca *x509.Certificate) bool {
	return cert.CheckSignatureFrom(ca) == nil && time.Until(cert.NotAfter) > renewalMargin
}

func coversAll(cert *x509.Certificate, names []string) bool {
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if cert.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

func newCA(files Files) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	t := template("clusterflow CA", caLifetime)
	t.IsCA, t.BasicConstraintsValid = true, true
	t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, t, t, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(files.CA, files.CAKey, der, key); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func leaf(name string, names []string, usages ...x509.ExtKeyUsage) *x509.Certificate {
	t := template(name, leafLifetime)
	t.ExtKeyUsage = usages
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else if n != "" {
			t.DNSNames = append(t.DNSNames, n)
		}
	}
	return t
}

func template(name string, lifetime time.Duration) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"clusterflow"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func issue(certFile, keyFile string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, t *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return writePair(certFile, keyFile, der, key)
}

// writePair writes the key first: a certificate is never there without its key.
func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return atomicfile.Write(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func loadPair(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("not an ECDSA key")
	}
	return cert, key, nil
}
