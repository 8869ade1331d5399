package starter

import (
	"context"
	"fmt"
	"time"

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
	// namespaceID is the namespace's, learned at the first signature.
	namespaceID string
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

// sign signs c's manifest, when the Starter signs, for the namespace by its ID and for the
// generation the change makes: 1 for a deploy, the cluster's next for an apply (which the
// cluster says; another change that comes first makes the apply refused, to sign again).
func (s *Starter) sign(ctx context.Context, c spec.Cluster, deploy bool) (spec.Cluster, error) {
	if s.signer == nil {
		return c, nil
	}
	id, err := s.signerNamespaceID(ctx)
	if err != nil {
		return c, err
	}
	generation := 1
	if !deploy {
		m, err := s.manifestToSign(ctx, c.Name, workflows.ResizeRequest{})
		if err != nil {
			return c, err
		}
		generation = m.Generation
	}
	c.Signature = &spec.Signature{Key: s.signer.key.Name, NamespaceID: id, Generation: generation, Runtime: true, SignedAt: signingTime()}
	c.Signature = s.signer.key.Sign(signing.ManifestOf(c, s.signer.namespace))
	return c, nil
}

// signingTime is when a signature is made, to the second, in UTC: what a host's
// high-water mark of the cluster's name compares.
func signingTime() time.Time { return time.Now().UTC().Truncate(time.Second) }

// signerNamespaceID is the ID of the namespace the Starter signs for.
func (s *Starter) signerNamespaceID(ctx context.Context) (string, error) {
	if s.signer.namespaceID == "" {
		id, err := s.NamespaceID(ctx, s.signer.namespace)
		if err != nil {
			return "", fmt.Errorf("learn the ID of namespace %s to sign for: %w", s.signer.namespace, err)
		}
		s.signer.namespaceID = id
	}
	return s.signer.namespaceID, nil
}

// signResize signs the manifest the cluster's spec will have once resized, when the
// Starter signs: the cluster says what it is (ManifestQuery), since a resize names only
// counts.
func (s *Starter) signResize(ctx context.Context, name string, req workflows.ResizeRequest) (workflows.ResizeRequest, error) {
	if s.signer == nil {
		return req, nil
	}
	m, err := s.manifestToSign(ctx, name, req)
	if err != nil {
		return req, err
	}
	if m.NamespaceID, err = s.signerNamespaceID(ctx); err != nil {
		return req, err
	}
	m.SignedAt = signingTime()
	req.Signature = s.signer.key.Sign(m)
	return req, nil
}

// manifestToSign asks the cluster for the manifest a change to req's counts would have,
// with the generation it would make.
func (s *Starter) manifestToSign(ctx context.Context, name string, req workflows.ResizeRequest) (signing.Manifest, error) {
	var m signing.Manifest
	if err := s.queryCluster(ctx, name, workflows.ManifestQuery, "ask cluster "+name+" for the manifest to sign", &m, req); err != nil {
		return m, err
	}
	if m.Namespace != s.signer.namespace {
		return m, fmt.Errorf("cluster %s runs in namespace %q, not %q as this signature would say", name, m.Namespace, s.signer.namespace)
	}
	return m, nil
}
