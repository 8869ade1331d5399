package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Sizes are part of the contract. Everything clusterflow sends through Temporal is bounded
// by these, so that no payload passes Temporal's 2 MiB, no workflow task its 4 MiB and no
// history its 50 MB, whatever a spec asks for. A spec past one is refused with the field
// named, by the CLI, by the update validators and by the cluster workflow itself.
const (
	// MaxRoleEnvBytes bounds one role's env: its names and values as JSON text, the form in
	// which they travel (see EnvBytes). A script's whole environment must also stay well
	// under Linux's 128 KiB per string and 2 MiB for arguments and environment together.
	MaxRoleEnvBytes = 64 << 10
	// MaxClusterEnvBytes bounds the env of all roles together: it travels with the spec in
	// the cluster workflow's input, beside up to MaxTotalScriptSize of scripts.
	MaxClusterEnvBytes = 256 << 10
	// MaxClusterMembers bounds members: each costs a record in the workflow's state, which
	// continue-as-new carries beside the spec in one payload. 20,000 members take about
	// 320 KiB gzipped (16 bytes each), which fits beside the largest spec (1 MiB of scripts
	// and 256 KiB of env) under Temporal's 2 MiB. One role may hold them all: a role's
	// operations run as batches of 250 members, a child workflow each, whatever its size.
	MaxClusterMembers = 20_000
	MaxRoleMembers    = MaxClusterMembers
	// MaxRoles bounds a cluster's roles: each is a child workflow per operation and a line of
	// the spec the workflow carries.
	MaxRoles = 100
	// MaxSpecFileSize bounds a spec file read from disk (scripts are bounded on their own).
	MaxSpecFileSize = 1 << 20
	// MaxTextBytes bounds a free-text field a client sends with a member event (reason,
	// source): they are kept in the member's health history.
	MaxTextBytes = 1 << 10
	// MaxMemberNameLength is the longest member name: <cluster>-<role>-<ordinal>, two DNS
	// labels and an ordinal.
	MaxMemberNameLength = 63 + 1 + 63 + 1 + 10
)

// EnvBytes is the size an env takes as JSON text, which is at least what it takes in a
// script's environment (len(name)+len(value)+2 a variable): escapes only add to it.
func EnvBytes(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += JSONSize(k) + JSONSize(v)
	}
	return n
}

// JSONSize is the length of s as a JSON string, quotes and escapes included.
func JSONSize(s string) int {
	data, err := json.Marshal(s)
	if err != nil {
		return len(s) + 2
	}
	return len(data)
}

// ContentHash is the SHA-256, in hex, that startscripts and envs are named by.
func ContentHash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// EnvHash names a role's env among a cluster's files: the hash of its JSON, whose keys
// encoding/json sorts, so the same env always has the same name. An empty env has none.
func EnvHash(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	data, err := json.Marshal(env)
	if err != nil {
		return "" // a map of strings always encodes
	}
	return ContentHash(data)
}

// CheckLimits names every size limit a validated cluster passes: a spec built by Parse has
// been checked already, but an update or a workflow input may come from a raw SDK call.
func CheckLimits(c Cluster) []Problem {
	var ps problems
	checkLimits(c, &ps)
	return ps
}

func checkLimits(c Cluster, ps *problems) {
	if n := len(c.Roles); n > MaxRoles {
		ps.add("roles", "%d roles; a cluster has at most %d", n, MaxRoles)
	}
	env, members := 0, 0
	for i, r := range c.Roles {
		path := fmt.Sprintf("roles[%d]", i)
		if r.Members > MaxRoleMembers {
			ps.add(path+".members", "is %d; a role has at most %d members", r.Members, MaxRoleMembers)
		}
		if n := EnvBytes(r.Env); n > MaxRoleEnvBytes {
			ps.add(path+".env", "is %s (names and values); a role's env is limited to %s", size(n), size(MaxRoleEnvBytes))
		}
		env += EnvBytes(r.Env)
		members += max(r.Members, 0)
	}
	if members > MaxClusterMembers {
		ps.add("roles", "%d members in all; a cluster has at most %d", members, MaxClusterMembers)
	}
	if env > MaxClusterEnvBytes {
		ps.add("roles", "the roles' env is %s in all; a cluster's env is limited to %s", size(env), size(MaxClusterEnvBytes))
	}
}

// size writes a byte count in KiB, rounding up, so that one byte over a limit shows.
func size(n int) string {
	return fmt.Sprintf("%d KiB", (n+1023)>>10)
}

// Some names a few items of a list and counts the rest, so that a message about thousands
// of members stays short: "a, b, c and 997 more".
func Some(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// Clip cuts text to at most n bytes, on a rune boundary, marking the cut.
func Clip(text string, n int) string {
	if len(text) <= n {
		return text
	}
	cut := n - len("…")
	for cut > 0 && !runeStart(text[cut]) {
		cut--
	}
	return text[:cut] + "…"
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }
