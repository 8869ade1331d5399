package spec

import (
	"fmt"
	"regexp"
	"strings"
)

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// CheckName reports why a name is not a DNS-1123 label. Cluster, role and member names all
// become folder names and script arguments, so this is the gate that keeps them harmless.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is empty")
	case len(name) > 63:
		return fmt.Errorf("%q is %d characters; a DNS-1123 label has at most 63", name, len(name))
	case !dns1123Label.MatchString(name):
		return fmt.Errorf("%q is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit)", name)
	}
	return nil
}

var memberNameShape = regexp.MustCompile(`^[a-z0-9][-a-z0-9]*[0-9]$`)

// CheckMemberName reports why a name cannot be a member's: <cluster>-<role>-<ordinal>, two
// DNS-1123 labels and an ordinal, so longer than a DNS label when the names are long. It
// checks the shape only; ParseMemberName also checks the parts.
func CheckMemberName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is empty")
	case len(name) > MaxMemberNameLength:
		return fmt.Errorf("%q is %d characters; a member name has at most %d", name, len(name), MaxMemberNameLength)
	case !memberNameShape.MatchString(name):
		return fmt.Errorf("%q is not a member name (<cluster>-<role>-<ordinal>: lower-case letters, digits and '-')", name)
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnvName says what is wrong with name as a variable of a role's env, if anything.
func CheckEnvName(name string) error {
	switch {
	case !envName.MatchString(name):
		return fmt.Errorf("is not a valid environment variable name (letters, digits and '_', not starting with a digit)")
	case strings.HasPrefix(name, ReservedEnvPrefix):
		return fmt.Errorf("the %s prefix is reserved for variables clusterflow sets", ReservedEnvPrefix)
	}
	return nil
}

// ReservedEnvPrefix marks the variables clusterflow itself sets for startscripts.
const ReservedEnvPrefix = "CLUSTERFLOW_"
