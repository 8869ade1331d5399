package gateway

import (
	"fmt"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// notification is Alertmanager's webhook payload, version 4: the fields the gateway reads.
type notification struct {
	Version string  `json:"version"`
	Status  string  `json:"status"`
	Alerts  []alert `json:"alerts"`
}

type alert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Fingerprint string            `json:"fingerprint"`
}

// Labels names the alert labels that say which member an alert is about, and what event.
type Labels struct {
	Cluster, Member, Event string
}

// DefaultLabels are the label names the gateway reads unless told otherwise.
var DefaultLabels = Labels{Cluster: "clusterflow_cluster", Member: "clusterflow_member", Event: "clusterflow_event"}

// checkNotification refuses a payload that is not a version 4 notification.
func checkNotification(n notification) error {
	if n.Version != "4" {
		return fmt.Errorf("version: %q is not 4, the Alertmanager webhook version this gateway reads", n.Version)
	}
	if len(n.Alerts) == 0 {
		return fmt.Errorf("alerts: none in the notification")
	}
	if len(n.Alerts) > MaxAlerts {
		return fmt.Errorf("alerts: %d in one notification; at most %d (set the receiver's max_alerts)", len(n.Alerts), MaxAlerts)
	}
	return nil
}

// MaxAlerts bounds the alerts of one notification: each is a call to Temporal within the
// request's time, and the answer lists them all.
const MaxAlerts = 1000

// alertEvent is what one alert asks for: an event about a member of a cluster, or why it
// asks for nothing that can be done.
type alertEvent struct {
	cluster string
	event   workflows.MemberEvent
	err     error
}

// alertEvents reads every alert of a notification; a bad alert does not spoil the others.
func (l Labels) alertEvents(n notification) []alertEvent {
	out := make([]alertEvent, len(n.Alerts))
	for i, a := range n.Alerts {
		cluster, ev, err := l.memberEvent(a)
		if err == nil {
			err = checkNames(cluster, ev.Member)
		}
		out[i] = alertEvent{cluster: cluster, event: ev, err: err}
	}
	return out
}

// memberEvent turns one alert into the cluster it is about and the event to report:
// firing is down (or the event label's gone or unhealthy), resolved is up.
func (l Labels) memberEvent(a alert) (string, workflows.MemberEvent, error) {
	cluster, member := a.Labels[l.Cluster], a.Labels[l.Member]
	if cluster == "" || member == "" {
		return "", workflows.MemberEvent{}, fmt.Errorf("labels: the alert has no %s and %s labels naming the member", l.Cluster, l.Member)
	}
	ev := workflows.MemberEvent{Member: member, Source: "alertmanager", Reason: reasonOf(a)}
	switch a.Status {
	case "firing":
		ev.Event, ev.At = workflows.HealthDown, a.StartsAt
		switch e := workflows.HealthEvent(a.Labels[l.Event]); e {
		case "", workflows.HealthDown:
		case workflows.HealthGone, workflows.HealthUnhealthy:
			ev.Event = e
		default:
			return cluster, ev, fmt.Errorf("labels.%s: %q is not down, gone or unhealthy", l.Event, e)
		}
	case "resolved":
		ev.Event, ev.At = workflows.HealthUp, a.EndsAt
	default:
		return cluster, ev, fmt.Errorf("status: %q is neither firing nor resolved", a.Status)
	}
	return cluster, ev, nil
}

// reasonOf is the alert's summary, or its name, cut to the length a reason may have: the
// alert is not the caller's to shorten, and refusing it would only make Alertmanager send
// it again.
func reasonOf(a alert) string {
	for _, s := range []string{a.Annotations["summary"], a.Annotations["description"], a.Labels["alertname"]} {
		if s = strings.TrimSpace(s); s != "" {
			return spec.Clip(s, spec.MaxTextBytes)
		}
	}
	return ""
}
