package testenv

// Reading docker-compose.yml, as compose reads it with the operator's .env.

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ComposeFile is the part of docker-compose.yml the tests read.
type ComposeFile struct {
	Services map[string]ComposeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

// ComposeService is one service of the compose file.
type ComposeService struct {
	Image       string                       `yaml:"image"`
	Build       any                          `yaml:"build"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Environment map[string]string            `yaml:"environment"`
	Entrypoint  []string                     `yaml:"entrypoint"`
	Command     []string                     `yaml:"command"`
	Volumes     []string                     `yaml:"volumes"`
	Ports       []string                     `yaml:"ports"`
	CapDrop     []string                     `yaml:"cap_drop"`
	CapAdd      []string                     `yaml:"cap_add"`
	User        string                       `yaml:"user"`
	SecurityOpt []string                     `yaml:"security_opt"`
	Networks    []string                     `yaml:"networks"`
	NetworkMode string                       `yaml:"network_mode"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Deploy struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
}

// ReadCompose reads the checkout's docker-compose.yml, with its variables filled in as
// compose fills them from .env: the tests' own values (ComposeVars).
func ReadCompose() (ComposeFile, error) {
	c, err := ReadComposeRaw()
	if err != nil {
		return c, err
	}
	for name, svc := range c.Services {
		for k, v := range svc.Environment {
			if svc.Environment[k], err = InterpolateCompose(v, ComposeVars); err != nil {
				return c, fmt.Errorf("docker-compose.yml: service %s: %s: %w", name, k, err)
			}
		}
	}
	return c, nil
}

// ReadComposeRaw reads the checkout's docker-compose.yml as written, variables and all.
func ReadComposeRaw() (ComposeFile, error) {
	var c ComposeFile
	root, err := ModuleRoot()
	if err != nil {
		return c, err
	}
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("docker-compose.yml is not valid YAML: %w", err)
	}
	return c, nil
}

// ComposeVars stand for the operator's .env: a password of the tests' own, made afresh in
// each test process, as the compose file asks every operator to choose one, and the user
// running the tests as the operator.
var ComposeVars = map[string]string{"POSTGRES_PASSWORD": rand.Text(), "OPERATOR_UID": strconv.Itoa(os.Getuid())}

// InterpolateCompose fills in compose's ${NAME}, ${NAME:-default} and ${NAME:?error} from
// vars, as compose does from .env; ${NAME:?error} with NAME unset or empty is the error.
func InterpolateCompose(value string, vars map[string]string) (string, error) {
	var missing error
	out := os.Expand(value, func(expr string) string {
		name, op, arg := expr, "", ""
		if i := strings.IndexAny(expr, ":-?"); i >= 0 {
			name, op = expr[:i], expr[i:]
			for _, p := range []string{":-", ":?", "-", "?"} {
				if rest, ok := strings.CutPrefix(op, p); ok {
					op, arg = p, rest
					break
				}
			}
		}
		v, set := vars[name]
		switch {
		case (op == ":-" && v == "") || (op == "-" && !set):
			return arg
		case (op == ":?" && v == "") || (op == "?" && !set):
			missing = fmt.Errorf("%s: %s", name, arg)
		}
		return v
	})
	return out, missing
}
