package backend

import (
	"bytes"
	"encoding/json"
)

// ConfigMeta describes every role and member of a cluster to its startscripts; it is how a
// worker finds its controller.
type ConfigMeta struct {
	Cluster string           `json:"cluster"`
	Roles   []ConfigMetaRole `json:"roles"`
	Members []ConfigMetaNode `json:"members"`
}

// ConfigMetaRole is one role and its member names.
type ConfigMetaRole struct {
	Name      string   `json:"name"`
	DependsOn []string `json:"dependsOn"`
	Members   []string `json:"members"`
}

// ConfigMetaNode is one member. Dir is filled in by the backend that writes the file.
type ConfigMetaNode struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Ordinal int    `json:"ordinal"`
	State   string `json:"state"`
	// Bootstrap marks the member that forms the app's cluster, while its role is set up
	// for the first time: the others join it.
	Bootstrap bool   `json:"bootstrap,omitempty"`
	Dir       string `json:"dir,omitempty"`
	// Host holds the member, and Address is how other members reach it: the workflow
	// sends its host's address, and the backend writing the file makes it the member's
	// (Provisioner.MemberAddress). Both are empty in single-host mode.
	Host    string `json:"host,omitempty"`
	Address string `json:"address,omitempty"`
	// Ports are the member's ports by name, when its role names any. Scripts find a
	// member's fields with grep and sed in this order, some across neighbours (ordinal and
	// state; address, ports and the line's end, as examples/etcd reads them): a field added
	// later goes between state and dir, as bootstrap did.
	Ports map[string]int `json:"ports,omitempty"`
}

// Encode writes the JSON with each member on a line of its own, so that shell scripts
// without a JSON parser can find a member with grep.
func (m ConfigMeta) Encode() ([]byte, error) {
	var b bytes.Buffer
	head, err := json.Marshal(struct {
		Cluster string           `json:"cluster"`
		Roles   []ConfigMetaRole `json:"roles"`
	}{m.Cluster, m.Roles})
	if err != nil {
		return nil, err
	}
	b.Write(head[:len(head)-1]) // reopen the object to append the members
	b.WriteString(",\n\"members\": [")
	for i, node := range m.Members {
		line, err := json.Marshal(node)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(line)
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}
