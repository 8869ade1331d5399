package spec

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Container is how a role's members run where each is a container of its own (the docker
// backend): the image they run, who scripts run as, what each may take, and the folders
// kept per member. A role that sets none of it runs on any backend; one that sets any runs
// only on a container backend, and the local backend refuses it by name rather than ignore
// it (a member that silently ran outside its image would be a different app).
type Container struct {
	// Image is the member's image, as the engine names it (repository[:tag] or @digest).
	Image string `json:"image,omitempty"`
	// User is who the member's scripts run as in the container, a numeric uid[:gid]: a
	// name means a different user in each image, and its uid is what owns files on the host.
	User string `json:"user,omitempty"`
	// Resources bound the member's container as a whole.
	Resources Resources `json:"resources,omitzero"`
	// Volumes are paths in the container kept in a volume of the member's own: across
	// restarts of its container, gone with the member.
	Volumes []string `json:"volumes,omitempty"`
	// Publish names the role's ports (roles[].ports) that each member's host publishes: the
	// same number on the host as in the container, on the host's publish address (loopback
	// unless its operator chose another). Nothing is published unless named here.
	Publish []string `json:"publish,omitempty"`
	// Privileged runs the member's container privileged: every capability and device of
	// its host. Only a host that allows it runs such a role (--allow-privileged); others
	// refuse it by name.
	Privileged bool `json:"privileged,omitempty"`
}

// Resources bound a member's container; a zero field is not bound.
type Resources struct {
	// CPUs is how many CPUs' time the container may take (0.5: half of one).
	CPUs float64 `json:"cpus,omitempty"`
	// Memory is the container's memory in bytes (written with a unit: 512Mi, 2Gi).
	Memory int64 `json:"memory,omitempty"`
	// PIDs bounds the container's processes and threads.
	PIDs int `json:"pids,omitempty"`
}

// ContainerFields names the container fields a role sets (none: it asks for no
// container), for a backend that refuses them. A function, not a method: Role embeds
// Container, and a method would be promoted to every role.
func ContainerFields(c Container) []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"image", c.Image != ""}, {"user", c.User != ""}, {"resources", c.Resources != (Resources{})}, {"volumes", len(c.Volumes) > 0}, {"publish", len(c.Publish) > 0}, {"privileged", c.Privileged}} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}

// Bounds of a role's container.
const (
	MaxVolumes       = 16
	MaxImageName     = 255
	MinMemory        = 6 << 20 // the engine refuses less
	MaxCPUs          = 1024
	MinContainerPIDs = 16
)

var (
	// imageName is the engine's reference syntax, loosely: what it refuses it names itself.
	imageName   = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:@-]*$`)
	numericUser = regexp.MustCompile(`^[0-9]{1,10}(:[0-9]{1,10})?$`)
	memorySize  = regexp.MustCompile(`^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$`)
)

type draftContainer struct {
	Image, User *string
	Resources   *draftResources
	Volumes     []string
	Publish     []string
	Privileged  *bool
}

type draftResources struct {
	CPUs, Memory *string
	PIDs         *int
}

func (w walker) resources(path string, n *yaml.Node) *draftResources {
	r := &draftResources{}
	w.mapping(path, n, map[string]func(string, *yaml.Node){
		"cpus":   func(p string, n *yaml.Node) { r.CPUs = w.str(p, n) },
		"memory": func(p string, n *yaml.Node) { r.Memory = w.str(p, n) },
		"pids":   func(p string, n *yaml.Node) { r.PIDs = w.integer(p, n) },
	})
	return r
}

// checkContainer reads a role's container fields, naming each problem; ports are the
// role's, which publish names.
func checkContainer(at string, d draftContainer, ports map[string]int, ps *problems) Container {
	var c Container
	if d.Image != nil {
		switch image := *d.Image; {
		case image == "":
			ps.add(at+".image", "is empty; name an image, such as registry.example.com/app:1.2, or leave it out")
		case len(image) > MaxImageName || !imageName.MatchString(image):
			ps.add(at+".image", "%q is not an image reference (lowercase repository[:tag] or @sha256:digest, at most %d characters)", image, MaxImageName)
		default:
			c.Image = image
		}
	}
	if d.User != nil {
		if numericUser.MatchString(*d.User) {
			c.User = *d.User
		} else {
			ps.add(at+".user", "%q is not a numeric uid[:gid]: a user's name means someone else in each image, and its number is what owns the member's files on the host", *d.User)
		}
	}
	if r := d.Resources; r != nil {
		if r.CPUs != nil {
			cpus, err := strconv.ParseFloat(*r.CPUs, 64)
			if err != nil || cpus <= 0 || cpus > MaxCPUs {
				ps.add(at+".resources.cpus", "%q is not a number of CPUs above 0 and at most %d (0.5 is half of one)", *r.CPUs, MaxCPUs)
			} else {
				c.Resources.CPUs = cpus
			}
		}
		if r.Memory != nil {
			bytes, ok := parseMemory(*r.Memory)
			switch {
			case !ok:
				ps.add(at+".resources.memory", "%q is not a size (write e.g. 512Mi or 2Gi)", *r.Memory)
			case bytes < MinMemory:
				ps.add(at+".resources.memory", "%q is under %dMi, the least a container runs with", *r.Memory, MinMemory>>20)
			default:
				c.Resources.Memory = bytes
			}
		}
		if r.PIDs != nil {
			if *r.PIDs < MinContainerPIDs || *r.PIDs > MaxLimits.Processes {
				ps.add(at+".resources.pids", "is %d; it must be from %d to %d", *r.PIDs, MinContainerPIDs, MaxLimits.Processes)
			} else {
				c.Resources.PIDs = *r.PIDs
			}
		}
	}
	if len(d.Volumes) > MaxVolumes {
		ps.add(at+".volumes", "lists %d paths; a role keeps at most %d", len(d.Volumes), MaxVolumes)
	}
	c.Volumes = eachOnce(at+".volumes", d.Volumes, func(v string) string {
		switch {
		case !strings.HasPrefix(v, "/") || path.Clean(v) != v || v == "/":
			return "is not an absolute, clean path below / in the container"
		case strings.ContainsAny(v, ":,\n"):
			return "holds ':' or ',', which the engine reads as mount options"
		}
		return ""
	}, ps)
	c.Publish = eachOnce(at+".publish", d.Publish, func(name string) string {
		if _, ok := ports[name]; !ok {
			return "is not one of the role's ports (roles[].ports names them)"
		}
		return ""
	}, ps)
	c.Privileged = d.Privileged != nil && *d.Privileged
	// Resources bound a member in a folder of its host too (its cgroup); the others are the
	// image's.
	if d.Image == nil && (d.User != nil || d.Volumes != nil || d.Publish != nil || d.Privileged != nil) {
		ps.add(at+".image", "is required with user, volumes, publish or privileged: they say how the role's image runs")
	}
	return c
}

// eachOnce reads a list's items, naming each that check refuses (saying why) or that is
// listed twice.
func eachOnce(at string, items []string, check func(string) string, ps *problems) []string {
	var taken []string
	seen := map[string]bool{}
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", at, i)
		if why := check(item); why != "" {
			ps.add(p, "%q %s", item, why)
		} else if seen[item] {
			ps.add(p, "%q is listed twice", item)
		} else {
			seen[item] = true
			taken = append(taken, item)
		}
	}
	return taken
}

// ParseMemory reads a memory size as a spec writes it (512Mi, 2Gi, 1G, or bytes).
func ParseMemory(s string) (int64, bool) { return parseMemory(s) }

// parseMemory reads a size with an optional unit: k, M, G, T (powers of 1000) or Ki, Mi,
// Gi, Ti (of 1024); no unit is bytes.
func parseMemory(s string) (int64, bool) {
	m := memorySize.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := map[string]int64{"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}[m[2]]
	if n > (1<<62)/unit {
		return 0, false
	}
	return n * unit, true
}
