// Package session guards what `clusterflow dev` serves to a browser (the Web UI, and the
// codec server it decodes through) with a secret kept in dev's state folder, which only
// its user reads: a member's script, which runs as a user of its own and can reach these
// loopback ports, cannot read it, and so cannot act through the UI on any cluster.
//
// The browser is let in once by the address dev prints, which carries the secret
// (?token=...): the answer sets it as a cookie, HttpOnly and SameSite=Strict, and sends
// the browser on to the same address without it.
package session

import (
	"crypto/subtle"
	"fmt"
	"html"
	"net/http"
	"net/url"
)

// CookieName is the session cookie's name.
const CookieName = "clusterflow-session"

// TokenParam is the query parameter that carries the secret in the address dev prints.
const TokenParam = "token"

// Guard is a session secret and where it is kept, for the refusal to say.
type Guard struct {
	Secret string
	// File is where the secret is kept, named in refusals.
	File string
}

// Allows says whether the request carries the session cookie.
func (g Guard) Allows(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(g.Secret)) == 1
}

// Wrap lets through, to next, requests that carry the session, and lets a browser in by the
// address with the secret; it refuses everything else.
func (g Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token := r.URL.Query().Get(TokenParam); token != "" {
			g.login(w, r, token)
			return
		}
		if !g.Allows(r) {
			g.Refuse(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// login sets the cookie for a request with the right secret, and sends the browser to
// the same address without it.
func (g Guard) login(w http.ResponseWriter, r *http.Request, token string) {
	if subtle.ConstantTimeCompare([]byte(token), []byte(g.Secret)) != 1 {
		g.Refuse(w)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: g.Secret, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	to := *r.URL
	q := to.Query()
	q.Del(TokenParam)
	to.RawQuery = q.Encode()
	to.Scheme, to.Host = "", ""
	if to.Path == "" {
		to.Path = "/"
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, (&url.URL{Path: to.Path, RawQuery: to.RawQuery}).String(), http.StatusSeeOther)
}

// Refuse answers a request without the session.
func (g Guard) Refuse(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, "<!doctype html><title>clusterflow</title><p>Open the address <code>clusterflow dev</code> printed: it lets this browser in. Its secret is kept in %s.</p>\n", html.EscapeString(g.File))
}

// LoginURL is base (the UI's address and path) with the secret, as dev prints it.
func (g Guard) LoginURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	q.Set(TokenParam, g.Secret)
	u.RawQuery = q.Encode()
	return u.String()
}
