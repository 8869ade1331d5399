package docker

// What the engine holds of a member or a cluster: removed with it, and listed for
// reconcile.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
)

// RemoveMember implements backend.Backend: the container and its volumes go, then the
// member's folder.
func (d *Backend) RemoveMember(ctx context.Context, m backend.MemberRef) error {
	if err := d.RefuseElsewhere(m.Folder()); err != nil {
		return err
	}
	if err := d.removeAll(ctx, client.Filters{}.Add("label", LabelCluster+"="+m.Folder().Key(), LabelMember+"="+m.Name), false); err != nil {
		return err
	}
	return d.Backend.RemoveMember(ctx, m)
}

// RemoveCluster implements backend.Backend: what is left of the cluster on the engine
// goes with its folder, its network last.
func (d *Backend) RemoveCluster(ctx context.Context, key string) error {
	c, err := backend.ParseKey(key)
	if err != nil {
		return err
	}
	if err := d.RefuseElsewhere(c); err != nil {
		return err
	}
	if err := d.removeAll(ctx, client.Filters{}.Add("label", LabelCluster+"="+key), true); err != nil {
		return err
	}
	return d.Backend.RemoveCluster(ctx, key)
}

// removeAll removes the containers and volumes the filter finds, and its networks too
// when asked.
func (d *Backend) removeAll(ctx context.Context, filter client.Filters, networks bool) error {
	list, err := d.engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list.Items {
		if _, err := d.engine.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", strings.Join(c.Names, ","), err))
		}
	}
	volumes, err := d.engine.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	for _, v := range volumes.Items {
		if _, err := d.engine.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
		}
	}
	if networks {
		nets, err := d.engine.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
		if err != nil {
			return fmt.Errorf("list networks: %w", err)
		}
		for _, n := range nets.Items {
			if _, err := d.engine.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ListMembers implements backend.Backend: a member is its container, so one whose
// container vanished is gone (and replaced), and a labelled container the cluster never
// knew is listed, for the cluster to remove as a rogue.
func (d *Backend) ListMembers(ctx context.Context, key string) ([]backend.MemberRef, error) {
	c, err := backend.ParseKey(key)
	if err != nil {
		return nil, err
	}
	if err := d.RefuseElsewhere(c); err != nil {
		return nil, err
	}
	list, err := d.engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelCluster+"="+key)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var members []backend.MemberRef
	for _, item := range list.Items {
		name := item.Labels[LabelMember]
		if role, _, ok := spec.ParseMemberName(c.Name, name); ok {
			members = append(members, backend.MemberRef{Cluster: c.Name, Home: c.Home, Role: role, Name: name})
		}
	}
	return members, nil
}

// ListClusters implements backend.Backend: the clusters with a folder here, and those of
// which the engine alone holds anything (their folder removed by hand, say), so that an
// orphan of either kind is found, and removed with everything labelled as its. What a
// label says another namespace owns is not listed.
func (d *Backend) ListClusters(ctx context.Context) ([]backend.HeldCluster, error) {
	held, err := d.Backend.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, c := range held {
		listed[c.Key()] = true
	}
	labelled := client.Filters{}.Add("label", LabelCluster)
	var labels []map[string]string
	containers, err := d.engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelled})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range containers.Items {
		labels = append(labels, c.Labels)
	}
	volumes, err := d.engine.VolumeList(ctx, client.VolumeListOptions{Filters: labelled})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	for _, v := range volumes.Items {
		labels = append(labels, v.Labels)
	}
	networks, err := d.engine.NetworkList(ctx, client.NetworkListOptions{Filters: labelled})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range networks.Items {
		labels = append(labels, n.Labels)
	}
	for _, l := range labels {
		c, err := backend.ParseKey(l[LabelCluster])
		owner := l[LabelNamespace]
		if err != nil || listed[c.Key()] || (owner != "" && d.Owner != "" && owner != d.Owner) || d.RefuseElsewhere(c) != nil {
			continue
		}
		listed[c.Key()] = true
		held = append(held, backend.HeldCluster{ClusterRef: c})
	}
	return held, nil
}
