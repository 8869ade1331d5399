package localca

import (
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
)

// Part is the folder of one part of a stack of services (docker-compose.yml's): the
// server's certificate, or a client's, with the CA's certificate to check the other side
// by. The folder and its files are the part's user's alone (modes 0700 and 0600): the
// user its container runs as. A client part is named by the folder it is in, its
// certificate's common name.
type Part struct {
	Dir string
	// Server says the part is the server's: server.pem and server-key.pem for Names (and
	// localhost, 127.0.0.1 and ::1), good for its own internal clients too. Otherwise it
	// is a client's: client.pem and client-key.pem.
	Server bool
	Names  []string
	// UID and GID own the folder and its files.
	UID, GID int
}

// EnsureStack keeps a stack's CA in caDir (this user's alone, as Ensure's folder; no part
// ever holds its key) and every part's certificates, made when missing, near their end, of
// another CA, or (a server's) lacking one of its names. The CA stays while it is current,
// so that every part keeps trusting the others. It runs again safely, as a one-shot job
// does at every start, and gives each part its owner again.
func EnsureStack(caDir string, parts []Part) error {
	files := FilesIn(caDir)
	if err := ownFolder(caDir); err != nil {
		return fmt.Errorf("the CA's folder %s: %w", caDir, err)
	}
	ca, caKey, err := loadPair(files.CA, files.CAKey)
	if err != nil || time.Until(ca.NotAfter) < renewalMargin {
		if ca, caKey, err = newCA(files); err != nil {
			return err
		}
	}
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := ensurePart(p, ca, caKey, caPEM); err != nil {
			return fmt.Errorf("certificates' folder %s: %w", p.Dir, err)
		}
	}
	return nil
}

// ownFolder makes dir this user's alone: a volume's mount point is there already, made
// by the engine with mode 0755, and is closed to others; one of another user is refused.
func ownFolder(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return errors.New("not a folder of this user's")
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.PrivateDir(dir)
}

func ensurePart(p Part, ca *x509.Certificate, caKey *ecdsa.PrivateKey, caPEM []byte) error {
	if err := os.Mkdir(p.Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	// A folder made elsewhere (a volume's mount point) is taken as it is, not followed.
	if fi, err := os.Lstat(p.Dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return errors.New("not a folder")
	}
	f := FilesIn(p.Dir)
	cert, key, usages, names := f.ClientCert, f.ClientKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, []string(nil)
	if p.Server {
		cert, key = f.ServerCert, f.ServerKey
		usages = append(usages, x509.ExtKeyUsageServerAuth)
		names = append([]string{ServerName, "127.0.0.1", "::1"}, p.Names...)
	}
	have, _, err := loadPair(cert, key)
	if err != nil || !current(have, ca) || !coversAll(have, names) {
		name := "clusterflow " + filepath.Base(p.Dir)
		if err := issue(cert, key, ca, caKey, leaf(name, names, usages...)); err != nil {
			return err
		}
	}
	// Written beside and renamed, as the pairs are: a link planted in the folder is replaced,
	// never followed.
	if err := atomicfile.Write(f.CA, caPEM, 0o600); err != nil {
		return err
	}
	for _, path := range []string{f.CA, cert, key, p.Dir} {
		if err := os.Lchown(path, p.UID, p.GID); err != nil {
			return err
		}
	}
	return os.Chmod(p.Dir, 0o700)
}
