package workflows

// RetryUpdate runs again the failed configure of members in config_error, and returns the
// cluster to convergence; it returns a ChangeResult once accepted.
const RetryUpdate = "retry"

// RetryRequest names the members to retry; none means every member in config_error.
type RetryRequest struct {
	Members []string `json:"members,omitempty"`
}
