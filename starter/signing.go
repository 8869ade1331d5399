package starter

import (
	"context"
	"fmt"

	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// SigningKey is a named key that signs specs (`clusterflow keys new NAME` makes one).
type SigningKey = signing.PrivateKey

// LoadSigningKey reads a signing key file, which must be its owner's alone.
func LoadSigningKey(path string) (SigningKey, error) { return signing.LoadPrivateKey(path) }

// signer signs the specs a Starter sends, for the namespace its client uses.
type signer struct {
	key       signing.PrivateKey
	namespace string
}

// SignWith makes the Starter sign every spec it deploys, applies or resizes with key, for
// namespace (the one its client talks to; "" is Temporal's "default"). Hosts started with
// --trusted-keys run only the scripts of specs signed by a key they trust.
func (s *Starter) SignWith(key SigningKey, namespace string) *Starter {
	if namespace == "" {
		namespace = "default"
	}
	s.signer = &signer{key: key, namespace: namespace}
	return s
}

// sign signs c's manifest, when the Starter signs.
func (s *Starter) sign(c spec.Cluster) spec.Cluster {
	if s.signer != nil {
		c.Signature = s.signer.key.Sign(signing.ManifestOf(c, s.signer.namespace))
	}
	return c
}

// signResize signs the manifest the cluster's spec will have once resized, when the
// Starter signs: the cluster says what it is (ManifestQuery), since a resize names only
// counts.
func (s *Starter) signResize(ctx context.Context, name string, req workflows.ResizeRequest) (workflows.ResizeRequest, error) {
	if s.signer == nil {
		return req, nil
	}
	queryCtx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	resp, err := s.client.QueryWorkflow(queryCtx, workflows.ClusterWorkflowID(name), "", workflows.ManifestQuery, req)
	switch {
	case isNotFound(err):
		return req, notFound(name)
	case noAnswer(err):
		return req, noWorker(s.taskQueue, err)
	case err != nil:
		return req, fmt.Errorf("ask cluster %s for the manifest to sign: %w", name, err)
	}
	var m signing.Manifest
	if err := resp.Get(&m); err != nil {
		return req, err
	}
	if m.Namespace != s.signer.namespace {
		return req, fmt.Errorf("cluster %s runs in namespace %q, not %q as this signature would say", name, m.Namespace, s.signer.namespace)
	}
	req.Signature = s.signer.key.Sign(m)
	return req, nil
}
