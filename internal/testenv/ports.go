package testenv

import (
	"net"
	"strconv"

	"github.com/clusterflow/clusterflow/internal/ports"
)

// FreeAddress returns a loopback address that is free now and reserved for the caller, for
// a process the test starts later (see package ports for why it stays free).
func FreeAddress() (string, error) {
	port, err := ports.Reserve("127.0.0.1")
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}
