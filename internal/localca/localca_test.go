package localca

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
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
	caPEM, _ := os.ReadFile(files.CA)
	if err := handshake(files.CA, files.ServerCert, files.ServerKey, files.ClientCert, files.ClientKey, ServerName); err != nil {
		t.Error(err)
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

// handshake serves with the server's pair and connects by serverName with the client's:
// nil when that works and a client with no certificate is refused, as mutual TLS must.
func handshake(caFile, serverCert, serverKey, clientCert, clientKey, serverName string) error {
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(caFile)
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("the CA's certificate %s: %v", caFile, err)
	}
	serverPair, err := tls.LoadX509KeyPair(serverCert, serverKey)
	if err != nil {
		return err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		return err
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
	clientPair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		return err
	}
	dial := func(certs []tls.Certificate) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: serverName, Certificates: certs})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Read(make([]byte, 1))
		return err
	}
	if err := dial([]tls.Certificate{clientPair}); err != nil {
		return fmt.Errorf("with the client certificate: %w", err)
	}
	if dial(nil) == nil {
		return errors.New("a client without a certificate was let in")
	}
	return nil
}

// A stack's parts: the server's folder and two clients', each its user's alone, none with
// the CA's key; the server is reached by its service name with either client's
// certificate. Run again, it keeps them, and gives a part its owner back.
func TestEnsureStackGivesEachPartItsOwnFolder(t *testing.T) {
	root := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	other := uid
	if uid == 0 {
		other = 61999 // as root (CI), the parts belong to users of their own
	}
	parts := []Part{
		{Dir: filepath.Join(root, "server"), Server: true, Names: []string{"temporal"}, UID: other, GID: other},
		{Dir: filepath.Join(root, "ui"), UID: other, GID: other},
		{Dir: filepath.Join(root, "hosts"), UID: uid, GID: gid},
	}
	// Each folder is there already, as a volume's mount point is: the engine's, mode 0755.
	caDir := filepath.Join(root, "ca")
	for _, dir := range []string{caDir, parts[0].Dir, parts[1].Dir, parts[2].Dir} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := EnsureStack(caDir, parts); err != nil {
		t.Fatal(err)
	}
	server, ui, hosts := FilesIn(parts[0].Dir), FilesIn(parts[1].Dir), FilesIn(parts[2].Dir)
	for i, p := range parts {
		entries, _ := os.ReadDir(p.Dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
			fi, err := os.Lstat(filepath.Join(p.Dir, e.Name()))
			if err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != uint32(p.UID) {
				t.Errorf("%s: %v, owner %d, want mode 0600 and owner %d", e.Name(), fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, p.UID)
			}
		}
		want := []string{"ca.pem", "client-key.pem", "client.pem"}
		if i == 0 {
			want = []string{"ca.pem", "server-key.pem", "server.pem"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s holds %v, want %v", p.Dir, names, want)
		}
		if fi, err := os.Stat(p.Dir); err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(p.UID) {
			t.Errorf("%s: %v, %v", p.Dir, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(caDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the CA's folder: %v, %v; want it closed to others", fi.Mode(), err)
	}
	for _, client := range []Files{ui, hosts} {
		if err := handshake(client.CA, server.ServerCert, server.ServerKey, client.ClientCert, client.ClientKey, "temporal"); err != nil {
			t.Errorf("client %s: %v", client.Dir, err)
		}
	}
	before, _ := os.ReadFile(server.ServerCert)
	if err := os.Chown(hosts.ClientKey, 61998, 61998); err != nil && uid == 0 {
		t.Fatal(err)
	}
	if err := EnsureStack(caDir, parts); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(server.ServerCert); string(after) != string(before) {
		t.Error("EnsureStack made a current server certificate again")
	}
	if fi, err := os.Stat(hosts.ClientKey); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Errorf("the hosts' key was not given back to its owner: %v", err)
	}
}
