package gateway

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/clusterflow/clusterflow/workflows"
)

// FuzzAlertmanagerPayload feeds the gateway's reading of Alertmanager notifications any
// bytes: it must never panic, and every alert it accepts names a valid member and a
// reportable event. The seeds are in testdata/fuzz and below.
func FuzzAlertmanagerPayload(f *testing.F) {
	f.Add([]byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"clusterflow_cluster":"demo","clusterflow_member":"demo-worker-1"},"annotations":{"summary":"disk full"},"startsAt":"2026-12-01T00:00:00Z","fingerprint":"a1"}]}`))
	f.Add([]byte(`{"version":"4","status":"resolved","alerts":[{"status":"resolved","labels":{"clusterflow_cluster":"demo","clusterflow_member":"demo-worker-1","clusterflow_event":"gone"},"endsAt":"2026-12-01T00:01:00Z"}]}`))
	f.Add([]byte(`{"version":"4","alerts":[{"status":"firing","labels":{"clusterflow_cluster":"../x","clusterflow_member":""}},{"status":"weird"}]}`))
	f.Add([]byte(`{"version":"4","alerts":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var n notification
		if json.Unmarshal(data, &n) != nil || checkNotification(n) != nil {
			return
		}
		events := DefaultLabels.alertEvents(n)
		if len(events) != len(n.Alerts) {
			t.Fatalf("%d alerts read as %d events", len(n.Alerts), len(events))
		}
		for _, ae := range events {
			if ae.err != nil {
				continue
			}
			if checkNames(ae.cluster, ae.event.Member) != nil || ae.event.Member == "" || !slices.Contains(workflows.ReportedEvents, ae.event.Event) {
				t.Fatalf("accepted a bad alert: %+v", ae)
			}
		}
	})
}

// One row per way an alert maps to a member event, with the label names changed as the
// flags allow.
func TestAnAlertBecomesAMemberEvent(t *testing.T) {
	labels := Labels{Cluster: "c", Member: "m", Event: "e"}
	for _, tc := range []struct {
		status, event string
		want          workflows.HealthEvent
		fails         string
	}{
		{"firing", "", workflows.HealthDown, ""},
		{"firing", "down", workflows.HealthDown, ""},
		{"firing", "gone", workflows.HealthGone, ""},
		{"firing", "unhealthy", workflows.HealthUnhealthy, ""},
		{"resolved", "gone", workflows.HealthUp, ""},
		{"firing", "up", "", `labels.e: "up" is not down, gone or unhealthy`},
		{"pending", "", "", `status: "pending" is neither firing nor resolved`},
	} {
		a := alert{Status: tc.status, Labels: map[string]string{"c": "demo", "m": "demo-worker-1", "e": tc.event, "alertname": "NodeDown"}}
		cluster, ev, err := labels.memberEvent(a)
		switch {
		case tc.fails != "":
			if err == nil || err.Error() != tc.fails {
				t.Errorf("%s/%s: error %v, want %q", tc.status, tc.event, err, tc.fails)
			}
		case err != nil || cluster != "demo" || ev.Member != "demo-worker-1" || ev.Event != tc.want || ev.Reason != "NodeDown" || ev.Source != "alertmanager":
			t.Errorf("%s/%s: %q %+v %v, want %s of demo-worker-1 for NodeDown", tc.status, tc.event, cluster, ev, err, tc.want)
		}
	}
	if _, _, err := labels.memberEvent(alert{Status: "firing", Labels: map[string]string{"clusterflow_cluster": "demo", "clusterflow_member": "demo-worker-1"}}); err == nil {
		t.Error("an alert without the renamed labels was accepted")
	}
}
