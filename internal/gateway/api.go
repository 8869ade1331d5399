// Package gateway is clusterflow's HTTP health gateway: webhooks (Alertmanager, a cloud's
// termination notice, curl) report member events over HTTP, and each is answered only
// once Temporal has taken it, so a 2xx means the event is recorded. Reads give the same
// JSON as `list -o json` and `status -o json`.
package gateway

import (
	"context"
	"time"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// Routes, as the mux matches them.
const (
	routeEvents       = "/v1/clusters/{cluster}/members/{member}/events"
	routeAlertmanager = "/v1/alertmanager"
	routeClusters     = "/v1/clusters"
	routeCluster      = "/v1/clusters/{cluster}"
	routeHealthz      = "/healthz"
	routeMetrics      = "/metrics"
)

// Clusters is what the gateway asks of Temporal; *starter.Starter is one.
type Clusters interface {
	ReportMemberEvent(ctx context.Context, cluster string, ev workflows.MemberEvent) (workflows.MemberEventResult, error)
	Status(ctx context.Context, name string) (workflows.ClusterStatus, error)
	List(ctx context.Context, all bool) ([]starter.ClusterSummary, error)
}

// EventRequest is the body of POST /v1/clusters/{cluster}/members/{member}/events.
type EventRequest struct {
	Event  workflows.HealthEvent `json:"event"`
	Reason string                `json:"reason,omitempty"`
	Source string                `json:"source,omitempty"`
	// At is when the source saw it (RFC 3339), as in the member-event signal.
	At time.Time `json:"at,omitzero"`
}

// ErrorBody is every error's JSON, in the CLI's words.
type ErrorBody struct {
	Error string `json:"error"`
}

// AlertResult says what one alert of an Alertmanager notification did.
type AlertResult struct {
	Fingerprint string                `json:"fingerprint,omitempty"`
	Cluster     string                `json:"cluster,omitempty"`
	Member      string                `json:"member,omitempty"`
	Event       workflows.HealthEvent `json:"event,omitempty"`
	From        workflows.MemberState `json:"from,omitempty"`
	To          workflows.MemberState `json:"to,omitempty"`
	Ignored     string                `json:"ignored,omitempty"`
	Error       string                `json:"error,omitempty"`
}

// AlertmanagerReply answers a notification, alert by alert.
type AlertmanagerReply struct {
	Results []AlertResult `json:"results"`
}
