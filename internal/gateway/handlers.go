package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/api/serviceerror"
	"golang.org/x/time/rate"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

func (g *Gateway) routes() {
	g.mux = http.NewServeMux()
	g.mux.HandleFunc("POST "+routeEvents, g.auth(g.postEvent, ScopeEvents, ScopeReplace))
	g.mux.HandleFunc("POST "+routeAlertmanager, g.auth(g.postAlertmanager, ScopeEvents, ScopeReplace))
	g.mux.HandleFunc("GET "+routeClusters, g.auth(g.getClusters, ScopeRead))
	g.mux.HandleFunc("GET "+routeCluster, g.auth(g.getCluster, ScopeRead))
	g.mux.Handle("GET "+routeMetrics, g.auth(promhttp.HandlerFor(g.metrics.registry, promhttp.HandlerOpts{}).ServeHTTP, ScopeRead))
	g.mux.HandleFunc("GET "+routeHealthz, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apperr.Errorf(apperr.NotFound, "no route %s %s (see the health gateway in docs/reference.md)", r.Method, r.URL.Path))
	})
}

// anonymous is who calls a gateway serving without tokens: it may do anything.
var anonymous = Token{Name: "anonymous", Scopes: scopes, Clusters: AllClusters}

type tokenKey struct{}

// auth checks the bearer token and that it has one of the route's scopes, then the
// token's rate. The handler checks the scope of what is asked and the cluster it is about
// (tokenOf, permit).
func (g *Gateway) auth(next http.HandlerFunc, anyOf ...Scope) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := anonymous
		if !g.opts.InsecureNoAuth {
			secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || secret == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="clusterflow"`)
				writeError(w, apperr.Errorf(apperr.Unauthenticated, "Authorization: missing; send 'Authorization: Bearer TOKEN'"))
				return
			}
			if tok, ok = g.opts.Tokens.Match(strings.TrimSpace(secret)); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="clusterflow", error="invalid_token"`)
				writeError(w, apperr.Errorf(apperr.Unauthenticated, "Authorization: the token is not known"))
				return
			}
			if rec, ok := w.(*recorder); ok {
				rec.token = tok.Name
			}
			if !slices.ContainsFunc(anyOf, tok.Allows) {
				writeError(w, apperr.Errorf(apperr.Forbidden, "token %q may not %s (its scopes: %s)", tok.Name, scopeVerb(anyOf[0]), joinScopes(tok.Scopes)))
				return
			}
		}
		if res := g.limiter(tok.Name).Reserve(); res.Delay() > 0 {
			res.Cancel()
			w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(res.Delay().Seconds()))))
			writeError(w, apperr.Errorf(apperr.RateLimited, "token %q sent more than %g requests or alerts a second; retry later", tok.Name, g.opts.Rate))
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
	}
}

func tokenOf(r *http.Request) Token {
	tok, _ := r.Context().Value(tokenKey{}).(Token)
	return tok
}

// permit says why the token may not do what scope names on the cluster, if it may not.
func permit(tok Token, scope Scope, cluster string) error {
	if !tok.Allows(scope) {
		return apperr.Errorf(apperr.Forbidden, "token %q may not %s (its scopes: %s)", tok.Name, scopeVerb(scope), joinScopes(tok.Scopes))
	}
	if !tok.AllowsCluster(cluster) {
		return apperr.Errorf(apperr.Forbidden, "token %q may not act on cluster %s (its clusters: %s)", tok.Name, cluster, strings.Join(tok.Clusters, ","))
	}
	return nil
}

// watchOnly says a token's reports about a cluster may not lead to a replacement: it lacks
// the replace scope there, so a down it reports takes a member down and no further.
func watchOnly(tok Token, cluster string) bool { return permit(tok, ScopeReplace, cluster) != nil }

// eventScope is the scope an event needs: gone and unhealthy replace the member and delete
// its data, so down/up alone does not allow them.
func eventScope(ev workflows.HealthEvent) Scope {
	if ev == workflows.HealthGone || ev == workflows.HealthUnhealthy {
		return ScopeReplace
	}
	return ScopeEvents
}

func scopeVerb(s Scope) string {
	switch s {
	case ScopeEvents:
		return "report events"
	case ScopeReplace:
		return "report members gone or unhealthy"
	}
	return "read"
}

func joinScopes(ss []Scope) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	return strings.Join(names, ",")
}

func (g *Gateway) limiter(token string) *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.limiters[token]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(g.opts.Rate), g.opts.Burst)
		g.limiters[token] = l
	}
	return l
}

// decode reads a JSON body of at most maxBody into v. A strict decode refuses fields v does
// not have: a misspelt "event" must not pass as an empty one.
func decode(w http.ResponseWriter, r *http.Request, v any, strict bool) error {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return apperr.Errorf(apperr.UnsupportedMedia, "Content-Type: %q is not application/json (with curl: -H 'Content-Type: application/json')", r.Header.Get("Content-Type"))
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if strict {
		dec.DisallowUnknownFields()
	}
	err = dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return apperr.Errorf(apperr.TooLarge, "body: over the limit of %d bytes", maxBody)
	case err != nil:
		return apperr.Errorf(apperr.Invalid, "body: not valid JSON for this request: %s", err)
	}
	return nil
}

// checkNames refuses cluster and member names that no cluster could have, before Temporal
// is asked: they would otherwise reach workflow IDs and logs.
func checkNames(cluster, member string) error {
	if err := spec.CheckName(cluster); err != nil {
		return apperr.Errorf(apperr.Invalid, "cluster: %s", err)
	}
	if err := spec.CheckMemberName(member); member != "" && err != nil {
		return apperr.Errorf(apperr.Invalid, "member: %s", err)
	}
	return nil
}

func (g *Gateway) postEvent(w http.ResponseWriter, r *http.Request) {
	cluster, member := r.PathValue("cluster"), r.PathValue("member")
	if err := checkNames(cluster, member); err != nil {
		g.refuse(w, err)
		return
	}
	var req EventRequest
	if err := decode(w, r, &req, true); err != nil {
		g.refuse(w, err)
		return
	}
	if err := workflows.CheckReportedEvent(req.Event); err != nil {
		g.refuse(w, apperr.Errorf(apperr.Invalid, "event: %s", err))
		return
	}
	if req.Source == "" {
		req.Source = "gateway"
	}
	ev := workflows.MemberEvent{Member: member, Event: req.Event, Reason: req.Reason, Source: req.Source, At: req.At}
	if err := workflows.CheckMemberEventText(ev); err != nil {
		g.refuse(w, err)
		return
	}
	if err := permit(tokenOf(r), eventScope(ev.Event), cluster); err != nil {
		g.refuse(w, err)
		return
	}
	ev.WatchOnly = watchOnly(tokenOf(r), cluster)
	res, err := g.report(r.Context(), cluster, ev)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// report sends one event and counts its outcome; errors come back with their code.
func (g *Gateway) report(ctx context.Context, cluster string, ev workflows.MemberEvent) (workflows.MemberEventResult, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.TemporalTimeout)
	defer cancel()
	res, err := g.clusters.ReportMemberEvent(ctx, cluster, ev)
	err = temporalError(err)
	switch {
	case apperr.Is(err, apperr.Unavailable), apperr.Is(err, apperr.Maintenance):
		g.metrics.events.WithLabelValues("unavailable").Inc()
	case err != nil:
		g.metrics.events.WithLabelValues("refused").Inc()
	case res.Ignored != "":
		g.metrics.events.WithLabelValues("ignored").Inc()
	default:
		g.metrics.events.WithLabelValues("changed").Inc()
	}
	return res, err
}

func (g *Gateway) refuse(w http.ResponseWriter, err error) {
	g.metrics.events.WithLabelValues("refused").Inc()
	writeError(w, err)
}

// postAlertmanager reports each alert of a notification. An alert about an unknown member
// is answered in its result without failing the others. Once Temporal does not answer,
// the rest are not tried, and the answer is 503 so that Alertmanager sends the notification
// again; the alerts already taken change nothing the second time.
func (g *Gateway) postAlertmanager(w http.ResponseWriter, r *http.Request) {
	var n notification
	if err := decode(w, r, &n, false); err != nil {
		g.refuse(w, err)
		return
	}
	if err := checkNotification(n); err != nil {
		g.refuse(w, apperr.Wrap(apperr.Invalid, err))
		return
	}
	// The rate counts alerts, not requests: a notification is charged for its alerts
	// beyond the one its request paid for, before any is reported.
	tok := tokenOf(r)
	if extra := len(n.Alerts) - 1; extra > 0 {
		if extra >= g.opts.Burst {
			g.refuse(w, apperr.Errorf(apperr.RateLimited, "alerts: %d in one notification, more than token %q may send at once (--burst %d); set the receiver's max_alerts to at most %d", len(n.Alerts), tok.Name, g.opts.Burst, g.opts.Burst))
			return
		}
		if res := g.limiter(tok.Name).ReserveN(time.Now(), extra); res.Delay() > 0 {
			res.Cancel()
			w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(res.Delay().Seconds()))))
			g.refuse(w, apperr.Errorf(apperr.RateLimited, "token %q sent more than %g alerts a second; retry later", tok.Name, g.opts.Rate))
			return
		}
	}
	reply := AlertmanagerReply{Results: make([]AlertResult, len(n.Alerts))}
	// unavailable is why the alerts after one Temporal did not take are not tried.
	unavailable := ""
	for i, ae := range g.opts.Labels.alertEvents(n) {
		res := &reply.Results[i]
		res.Fingerprint = n.Alerts[i].Fingerprint
		res.Cluster, res.Member, res.Event = ae.cluster, ae.event.Member, ae.event.Event
		if ae.err == nil {
			ae.err = permit(tok, eventScope(ae.event.Event), ae.cluster)
		}
		ae.event.WatchOnly = watchOnly(tok, ae.cluster)
		if ae.err != nil {
			g.metrics.events.WithLabelValues("refused").Inc()
			res.Error = ae.err.Error()
			continue
		}
		if unavailable != "" {
			// Each call would wait out the timeout again; Alertmanager resends them all.
			res.Error = "not sent: " + unavailable + "; retry later"
			continue
		}
		out, err := g.report(r.Context(), ae.cluster, ae.event)
		if err != nil {
			switch {
			case apperr.Is(err, apperr.Unavailable):
				unavailable = "Temporal did not answer an earlier alert"
			case apperr.Is(err, apperr.Maintenance):
				unavailable = "maintenance is on"
			}
			res.Error = err.Error()
			continue
		}
		res.From, res.To, res.Ignored = out.From, out.To, out.Ignored
	}
	if unavailable != "" {
		w.Header().Set("Retry-After", retryAfter)
		writeJSON(w, http.StatusServiceUnavailable, reply)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

func (g *Gateway) getClusters(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), g.opts.TemporalTimeout)
	defer cancel()
	clusters, err := g.clusters.List(ctx, r.URL.Query().Get("all") == "true")
	if err != nil {
		writeError(w, temporalError(err))
		return
	}
	// A token scoped to some clusters sees only those.
	clusters = slices.DeleteFunc(clusters, func(c starter.ClusterSummary) bool { return !tokenOf(r).AllowsCluster(c.Name) })
	if clusters == nil {
		clusters = []starter.ClusterSummary{}
	}
	writeJSON(w, http.StatusOK, clusters)
}

func (g *Gateway) getCluster(w http.ResponseWriter, r *http.Request) {
	cluster := r.PathValue("cluster")
	if err := checkNames(cluster, ""); err != nil {
		writeError(w, err)
		return
	}
	if err := permit(tokenOf(r), ScopeRead, cluster); err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.opts.TemporalTimeout)
	defer cancel()
	status, err := g.clusters.Status(ctx, cluster)
	if err != nil {
		writeError(w, temporalError(err))
		return
	}
	writeJSON(w, http.StatusOK, status)
}

// temporalError marks the errors of a server that did not answer as unavailable, so the
// caller hears 503 and retries; the others keep their code.
func temporalError(err error) error {
	if err == nil || apperr.CodeOf(err) != apperr.Internal {
		return err
	}
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	if errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded) {
		return apperr.Errorf(apperr.Unavailable, "Temporal did not answer; retry later: %w", err)
	}
	return err
}

func writeError(w http.ResponseWriter, err error) {
	status := apperr.HTTPStatus(err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, ErrorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
