package spec

import (
	"strings"
	"testing"
)

func TestEnvTakesSecretReferences(t *testing.T) {
	c, err := Parse([]byte(`
name: c
roles:
  - name: db
    startscript: s.sh
    env: {PLAIN: "x", DB_PASSWORD: {fromFile: db/password}, TOKEN: {fromEnv: API_TOKEN}}
`), "", testScripts)
	if err != nil {
		t.Fatal(err)
	}
	env := c.Roles[0].Env
	if env["PLAIN"] != "x" {
		t.Errorf("PLAIN: %q", env["PLAIN"])
	}
	for name, want := range map[string]SecretRef{"DB_PASSWORD": {FromFile: "db/password"}, "TOKEN": {FromEnv: "API_TOKEN"}} {
		got, ok := ParseSecret(env[name])
		if !ok || got != want {
			t.Errorf("%s: %q reads as %+v %v, want %+v", name, env[name], got, ok, want)
		}
	}
	if _, ok := ParseSecret(env["PLAIN"]); ok {
		t.Error("a literal reads as a secret reference")
	}
}

func TestBadSecretReferencesAreRefusedByName(t *testing.T) {
	for _, tc := range []struct{ env, says string }{
		{`{A: {fromFile: /etc/shadow}}`, `roles[0].env.A: fromFile "/etc/shadow" must be a plain path inside the host's secrets folder`},
		{`{A: {fromFile: ../other/password}}`, `roles[0].env.A: fromFile "../other/password" must be a plain path`},
		{`{A: {fromFile: a/../../b}}`, `must be a plain path`},
		{`{A: {fromEnv: "1X"}}`, `roles[0].env.A: fromEnv "1X" is not a valid environment variable name`},
		{`{A: {fromFile: a, fromEnv: B}}`, `roles[0].env.A: a secret takes exactly one of fromFile and fromEnv`},
		{`{A: {}}`, `roles[0].env.A: a secret takes exactly one of fromFile and fromEnv`},
		{`{A: {fromVault: x}}`, `roles[0].env.A.fromVault: unknown field`},
		{`{A: "a\u0000b"}`, `roles[0].env.A: contains a NUL byte`},
	} {
		_, err := Parse([]byte("name: c\nroles: [{name: r, startscript: s.sh, env: "+tc.env+"}]"), "", testScripts)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("env %s: %v, want an error saying %q", tc.env, err, tc.says)
		}
	}
}
