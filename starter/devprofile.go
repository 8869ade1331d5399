package starter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"go.temporal.io/sdk/contrib/envconfig"
)

// `clusterflow dev` serves its Temporal server with mutual TLS, a CA of its own, and
// writes how to reach it (a Temporal client profile: address, namespace, the client
// certificate's files) for each address it answers on, in its user's configuration folder.
// A client of that user told only the address (the CLI, a Go program through this package)
// finds it there: nothing to type, and nothing another user (a member's script) can read.

// DevProfilePath is where dev keeps the client profile of a server at address: a Temporal
// TOML profile, which `temporal --config-file` and the other SDKs' envconfig read too.
func DevProfilePath(address string) (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	name := strings.NewReplacer(":", "_", "[", "", "]", "", "/", "_").Replace(address)
	return filepath.Join(dir, "clusterflow", "dev", name+".toml"), nil
}

// devProfileTLS is the TLS of dev's profile for the address, if this user has one there
// that is theirs alone (a profile another user could write could send this user's
// requests elsewhere).
func devProfileTLS(address string) (*envconfig.ClientConfigTLS, error) {
	path, err := DevProfilePath(address)
	if err != nil {
		return nil, nil
	}
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.Mode().IsRegular() || !ok || int(st.Uid) != os.Getuid() || info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("dev's client profile %s is not this user's alone (a regular file of mode 0600): not used", path)
	}
	p, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{ConfigFilePath: path, DisableEnv: true})
	if err != nil {
		return nil, fmt.Errorf("dev's client profile %s: %w", path, err)
	}
	return p.TLS, nil
}

// WriteDevProfile writes the profile of a server dev runs at each of addresses, and returns
// what removes them again (those still its own).
func WriteDevProfile(p envconfig.ClientConfigProfile, addresses []string) (remove func(), err error) {
	written := map[string][]byte{}
	remove = func() {
		for path, data := range written {
			if now, err := os.ReadFile(path); err == nil && string(now) == string(data) {
				_ = os.Remove(path) // still its own: another dev on the address since keeps its
			}
		}
	}
	for _, address := range addresses {
		path, err := DevProfilePath(address)
		if err != nil {
			return remove, err
		}
		profile := p
		profile.Address = address
		data, err := (&envconfig.ClientConfig{Profiles: map[string]*envconfig.ClientConfigProfile{envconfig.DefaultConfigFileProfile: &profile}}).
			ToTOML(envconfig.ClientConfigToTOMLOptions{})
		if err != nil {
			return remove, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return remove, err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return remove, err
		}
		if err := os.Rename(tmp, path); err != nil {
			return remove, err
		}
		written[path] = data
	}
	return remove, nil
}
