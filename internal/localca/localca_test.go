package localca

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// The folder's certificates make a mutual TLS connection, and a client without the client
// certificate is refused; Ensure again keeps them, and adds a host the server lacks.
func TestEnsureMakesCertificatesForMutualTLSAndKeepsThem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	files, err := Ensure(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{files.CAKey, files.ServerKey, files.ClientKey, files.CA} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the folder: %v, %v", fi.Mode(), err)
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(files.CA)
	pool.AppendCertsFromPEM(caPEM)
	serverPair, err := tls.LoadX509KeyPair(files.ServerCert, files.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	clientPair, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(certs []tls.Certificate) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: ServerName, Certificates: certs})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Read(make([]byte, 1))
		return err
	}
	if err := dial([]tls.Certificate{clientPair}); err != nil {
		t.Errorf("with the client certificate: %v", err)
	}
	if err := dial(nil); err == nil {
		t.Error("a client without a certificate was let in")
	}
	before, _ := os.ReadFile(files.ClientCert)
	caBefore := caPEM
	if _, err := Ensure(dir, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(files.ClientCert)
	if string(after) != string(before) {
		t.Error("Ensure made a current client certificate again")
	}
	if _, err := Ensure(dir, []string{"10.213.0.5"}); err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(files.CA)
	server, _, err := loadPair(files.ServerCert, files.ServerKey)
	if err != nil || !coversAll(server, []string{"10.213.0.5", "localhost", "127.0.0.1"}) {
		t.Errorf("the server certificate lacks the host added: %v", err)
	}
	if string(caAfter) != string(caBefore) {
		t.Error("a new server certificate came with a new CA: clients would stop trusting it")
	}
}

// A folder another user could read is refused.
func TestEnsureRefusesAnOpenFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, nil); err == nil {
		t.Error("certificates kept in a folder of mode 0755")
	}
}
