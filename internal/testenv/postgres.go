package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/clusterflow/clusterflow/internal/ports"
)

// Postgres is a private PostgreSQL server for one test: its own data folder and a reserved
// loopback port.
type Postgres struct {
	Port           int
	User, Password string
	proc           *Process
}

// postgresBinDir finds Debian's PostgreSQL programs, which are not on PATH: the newest
// /usr/lib/postgresql/N/bin, or wherever PATH has initdb.
func postgresBinDir() (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if resolved, err := filepath.EvalSymlinks(initdb); err == nil {
			return filepath.Dir(resolved), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	if len(dirs) == 0 {
		return "", errors.New("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin); .ci/run installs Debian's postgresql package")
	}
	return dirs[len(dirs)-1], nil
}

// StartPostgres initialises and starts a PostgreSQL server in a fresh folder under dir, with
// one superuser, who logs in over TCP with the password.
// PostgreSQL refuses to run as root, so as root it runs as the postgres user the Debian
// package creates.
func StartPostgres(dir, user, password string) (*Postgres, error) {
	if user == "" || password == "" {
		return nil, errors.New("postgres: give a user and a password")
	}
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	port, err := ports.Reserve("127.0.0.1")
	if err != nil {
		return nil, err
	}
	pg := &Postgres{Port: port, User: user, Password: password}
	home, err := os.MkdirTemp(dir, "postgres-")
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential(home)
	if err != nil {
		return nil, err
	}
	pwFile := filepath.Join(home, "password")
	if err := os.WriteFile(pwFile, []byte(pg.Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(pwFile, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(home, "data")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", pg.User, "--pwfile", pwFile,
		"--auth-host", "scram-sha-256", "--auth-local", "trust", "--encoding", "UTF8", "--locale", "C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// TCP on loopback only, no Unix socket: everything dials the port, and a socket's path
	// under a long test's folder passes the 107 bytes a socket path may have.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-c", "unix_socket_directories=", "-c", "listen_addresses=127.0.0.1")
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if pg.proc, err = StartCommand(cmd, dir, "postgres"); err != nil {
		return nil, err
	}
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(time.Minute); ; {
		if conn, err := net.DialTimeout("tcp", address, time.Second); err == nil {
			conn.Close()
			break
		}
		select {
		case <-pg.proc.done:
			return nil, fmt.Errorf("postgres exited: %v\n%s", pg.proc.err, pg.proc.Output())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			pg.Stop()
			return nil, fmt.Errorf("postgres did not listen on %s within a minute\n%s", address, pg.proc.Output())
		}
	}
	return pg, nil
}

// postgresCredential is who PostgreSQL runs as: the postgres user when the test runs as
// root, owning home; nil (the test's own user) otherwise.
func postgresCredential(home string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs the postgres user (Debian's postgresql package makes it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(home, uid, gid); err != nil {
		return nil, err
	}
	// The postgres user must be able to reach home through the folders above it.
	for d := filepath.Dir(home); d != "/" && d != "."; d = filepath.Dir(d) {
		if info, err := os.Stat(d); err == nil && info.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, info.Mode().Perm()|0o011); err != nil {
				return nil, err
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Stop shuts the server down fast (SIGINT) and waits for it.
func (pg *Postgres) Stop() {
	if pg.proc == nil {
		return
	}
	if _, err := pg.proc.Signal(syscall.SIGINT, 30*time.Second); err != nil {
		pg.proc.Stop()
	}
}
