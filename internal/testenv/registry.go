package testenv

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Registry is an image registry a test serves on loopback, which an engine pulls from
// over plain HTTP (Docker trusts 127.0.0.0/8 so). It serves one image of one layer, and
// holds that layer back halfway until Release, so that a test sees a pull in progress.
type Registry struct {
	// Ref is the image's reference, for a role's image.
	Ref     string
	release chan struct{}
	once    sync.Once
}

// Release lets the held-back layer's second half go.
func (r *Registry) Release() { r.once.Do(func() { close(r.release) }) }

// heldFor bounds how long the layer is held back: no pull waits on a test that forgot.
const heldFor = 2 * time.Minute

// ServeImage serves, as repo:1, an image of programs (as ImportImage takes them) with a
// file of incompressible bytes, so that its layer's halves are megabytes each.
func ServeImage(t testing.TB, repo string, programs map[string]string) *Registry {
	t.Helper()
	pad := make([]byte, 4<<20)
	_, _ = rand.Read(pad)
	tarred := rootfs(t, programs, map[string][]byte{"/pad": pad})
	var layer bytes.Buffer
	gz := gzip.NewWriter(&layer)
	_, _ = gz.Write(tarred)
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=" + imagePath}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(tarred)}},
	})
	blobs := map[string][]byte{digestOf(config): config, digestOf(layer.Bytes()): layer.Bytes()}
	descriptor := func(mediaType string, blob []byte) map[string]any {
		return map[string]any{"mediaType": mediaType, "size": len(blob), "digest": digestOf(blob)}
	}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
		"config": descriptor("application/vnd.docker.container.image.v1+json", config),
		"layers": []any{descriptor("application/vnd.docker.image.rootfs.diff.tar.gzip", layer.Bytes())},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{Ref: fmt.Sprintf("%s/%s:1", ln.Addr(), repo), release: make(chan struct{})}
	send := func(w http.ResponseWriter, mediaType string, body []byte) {
		w.Header().Set("Content-Type", mediaType)
		w.Header().Set("Docker-Content-Digest", digestOf(body))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		path := strings.TrimPrefix(req.URL.Path, "/v2/"+repo+"/")
		switch {
		case req.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case path == "manifests/1" || path == "manifests/"+digestOf(manifest):
			send(w, "application/vnd.docker.distribution.manifest.v2+json", manifest)
			_, _ = w.Write(manifest)
		case strings.HasPrefix(path, "blobs/") && blobs[strings.TrimPrefix(path, "blobs/")] != nil:
			blob := blobs[strings.TrimPrefix(path, "blobs/")]
			send(w, "application/octet-stream", blob)
			if req.Method == http.MethodHead || !bytes.Equal(blob, layer.Bytes()) {
				_, _ = w.Write(blob)
				return
			}
			half := len(blob) / 2
			_, _ = w.Write(blob[:half])
			w.(http.Flusher).Flush()
			select {
			case <-r.release:
			case <-req.Context().Done():
				return
			case <-time.After(heldFor):
			}
			_, _ = w.Write(blob[half:])
		default:
			http.Error(w, `{"errors":[{"code":"NAME_UNKNOWN","message":"not here"}]}`, http.StatusNotFound)
		}
	})
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(func() {
		r.Release()
		_ = server.Close()
	})
	return r
}

func digestOf(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }
