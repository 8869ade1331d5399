package devserver

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/temporal"
)

// apiKeyClaims admits callers that present the API key as a bearer token, and the server's
// own system workers, which present the server's certificate. Everyone else gets no role,
// so the default authorizer turns them away. It exists to prove that clients really send
// their API key.
type apiKeyClaims struct {
	key, systemName string
}

func (c apiKeyClaims) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	switch {
	case info.TLSSubject != nil && info.TLSSubject.CommonName == c.systemName:
		return &authorization.Claims{Subject: "temporal-system", System: authorization.RoleAdmin}, nil
	case subtle.ConstantTimeCompare([]byte(info.AuthToken), []byte("Bearer "+c.key)) == 1:
		return &authorization.Claims{Subject: "api-key", System: authorization.RoleAdmin}, nil
	}
	return &authorization.Claims{}, nil
}

// apiKeyOptions makes the server require the API key; it needs TLS, whose certificate
// identifies the system workers.
func apiKeyOptions(key string, t *TLS) ([]temporal.ServerOption, error) {
	if t == nil {
		return nil, fmt.Errorf("an API key needs TLS too")
	}
	pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	claims := apiKeyClaims{key: key, systemName: cert.Subject.CommonName}
	return []temporal.ServerOption{
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claims }),
		temporal.WithAuthorizer(authorization.NewDefaultAuthorizer()),
	}, nil
}
