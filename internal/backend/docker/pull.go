package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// pull fetches the image unless the engine has it, telling LaunchProgress how far it got
// for the container it is for. A pull that fails is the member's configure error, with the
// engine's words: nothing retries it.
func (d *Backend) pull(ctx context.Context, container, image string) error {
	if _, err := d.engine.ImageInspect(ctx, image); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", image, err)
	}
	d.log.Info("Pulling image", zap.String("image", image), zap.String("container", container))
	d.pulls.set(container, "pulling image "+image)
	defer d.pulls.set(container, "")
	stream, err := d.engine.ImagePull(ctx, image, client.ImagePullOptions{})
	if err == nil {
		layers := pullLayers{}
		for msg, readErr := range stream.JSONMessages(ctx) {
			if err = readErr; err == nil && msg.Error != nil {
				err = errors.New(msg.Error.Message)
			}
			if err != nil {
				break
			}
			if layers.add(msg) {
				d.pulls.set(container, "pulling image "+image+": "+layers.String())
			}
		}
	}
	if err != nil {
		return &backend.RefusedError{Reason: fmt.Sprintf("pull image %s: %v", image, err)}
	}
	return nil
}

// LaunchProgress implements backend.LaunchWatcher: how far the pull of the member's image
// got, while its launch pulls one.
func (d *Backend) LaunchProgress(_ context.Context, m backend.MemberRef) (string, error) {
	return d.pulls.get(containerName(m.Folder(), m.Name)), nil
}

type pullProgress struct {
	mu          sync.Mutex
	byContainer map[string]string
}

func (p *pullProgress) set(container, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if line == "" {
		delete(p.byContainer, container)
	} else {
		p.byContainer[container] = line
	}
}

func (p *pullProgress) get(container string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byContainer[container]
}

// pullLayers sums an image pull's messages, a layer at a time (by the layer's ID).
type pullLayers map[string]*pullLayer

type pullLayer struct {
	done           bool
	current, total int64
}

// add takes in one message of the pull's and says whether the sum changed.
func (l pullLayers) add(msg jsonstream.Message) bool {
	if msg.ID == "" || strings.HasPrefix(msg.Status, "Pulling from") {
		return false // about the image, not a layer
	}
	layer, known := l[msg.ID]
	if !known {
		layer = &pullLayer{}
		l[msg.ID] = layer
	}
	switch {
	case msg.Status == "Downloading" && msg.Progress != nil:
		layer.current, layer.total = msg.Progress.Current, msg.Progress.Total
	case msg.Status == "Download complete" || msg.Status == "Pull complete" || msg.Status == "Already exists":
		layer.done = true
		layer.current = layer.total
	default:
		return !known
	}
	return true
}

// String is the pull's progress: layers done, and bytes of those with a known size.
func (l pullLayers) String() string {
	done, current, total := 0, int64(0), int64(0)
	for _, layer := range l {
		if layer.done {
			done++
		}
		current, total = current+layer.current, total+layer.total
	}
	return fmt.Sprintf("%d of %d layers, %.1f of %.1f MB", done, len(l), float64(current)/1e6, float64(total)/1e6)
}
