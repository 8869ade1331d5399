package cli

import (
	"context"
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/localca"
)

// runCerts makes (or keeps) the certificates of a stack whose Temporal frontend demands a
// client certificate, as docker-compose.yml's one-shot certificate job runs it: a CA of
// the stack's own, the server's certificate, and one client certificate per part that
// reaches the server, each in a folder of the user that part runs as.
func runCerts(_ context.Context, args []string) error {
	fs := newFlagSet("certs", "--ca-dir DIR --server DIR=OWNER [--server-name NAME]... --client DIR=OWNER...")
	caDir := fs.String("ca-dir", "", "the CA's folder, this user's alone (mode 0700); no part gets its key")
	server := fs.String("server", "", "the server's folder and its owner (USER[:GROUP], names or numbers): server.pem, server-key.pem, ca.pem")
	names := fs.StringSlice("server-name", nil, "a name the server is reached by, beside localhost and 127.0.0.1 (repeatable)")
	clients := fs.StringArray("client", nil, "a client's folder and its owner (USER[:GROUP]): client.pem, client-key.pem, ca.pem (repeatable)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *caDir == "" || *server == "" {
		return apperr.Errorf(apperr.Invalid, "--ca-dir and --server are required")
	}
	if fs.NArg() > 0 {
		return apperr.Errorf(apperr.Invalid, "certs takes no arguments, only flags: %q", fs.Args())
	}
	var parts []localca.Part
	for i, spec := range append([]string{*server}, *clients...) {
		flag := "--client"
		if i == 0 {
			flag = "--server"
		}
		p, err := certPart(flag, spec)
		if err != nil {
			return err
		}
		if p.Server = i == 0; p.Server {
			p.Names = *names
		}
		parts = append(parts, p)
	}
	if err := localca.EnsureStack(*caDir, parts); err != nil {
		return err
	}
	for _, p := range parts {
		what := "client certificate"
		if p.Server {
			what = "server certificate for " + strings.Join(append([]string{localca.ServerName, "127.0.0.1", "::1"}, p.Names...), ", ")
		}
		fmt.Printf("%s: %s, owned by %d:%d\n", p.Dir, what, p.UID, p.GID)
	}
	return nil
}

// certPart reads DIR=USER[:GROUP].
func certPart(flag, spec string) (localca.Part, error) {
	dir, owner, ok := strings.Cut(spec, "=")
	if !ok || dir == "" || owner == "" {
		return localca.Part{}, apperr.Errorf(apperr.Invalid, "%s %q: give FOLDER=OWNER, the owner a user (name or number) with an optional :GROUP", flag, spec)
	}
	if !filepath.IsAbs(dir) {
		return localca.Part{}, apperr.Errorf(apperr.Invalid, "%s %q: the folder must be an absolute path", flag, spec)
	}
	name, group, _ := strings.Cut(owner, ":")
	uid, gid, err := lookupUser(name)
	if err != nil {
		return localca.Part{}, apperr.Errorf(apperr.Invalid, "%s %q: user %q: %v", flag, spec, name, err)
	}
	if group != "" {
		if gid, err = lookupGroup(group); err != nil {
			return localca.Part{}, apperr.Errorf(apperr.Invalid, "%s %q: group %q: %v", flag, spec, group, err)
		}
	}
	return localca.Part{Dir: filepath.Clean(dir), UID: uid, GID: gid}, nil
}

func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}
