package devserver

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiopts "github.com/temporalio/ui-server/v2/server/server_options"
)

// UI is a running Temporal Web UI.
type UI struct {
	server *uiserver.Server
	url    string
}

// StartUI serves the Temporal Web UI on address, talking to the server at temporalAddress.
func StartUI(address, temporalAddress, namespace string) (*UI, error) {
	host, port, err := splitAddress(address)
	if err != nil {
		return nil, fmt.Errorf("ui address: %w", err)
	}
	if port == 0 {
		if port, err = freePort(host); err != nil {
			return nil, err
		}
	}
	// The UI server exits the whole process when it cannot bind, so check first.
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("web UI cannot listen on %s: %w", address, err)
	}
	l.Close()
	server := uiserver.NewServer(uiopts.WithConfigProvider(&uiconfig.Config{
		Host: host, Port: port,
		TemporalGRPCAddress: temporalAddress,
		DefaultNamespace:    namespace,
		EnableUI:            true,
		HideLogs:            true,
		DisableNewsFetch:    true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
	}))
	go func() { _ = server.Start() }()
	url := "http://" + net.JoinHostPort(displayHost(host), strconv.Itoa(port))
	if err := waitHealthy(url+"/healthz", 15*time.Second); err != nil {
		server.Stop()
		return nil, err
	}
	return &UI{server: server, url: url}, nil
}

// URL is where a browser opens the UI.
func (u *UI) URL() string { return u.url }

// Stop closes the UI server.
func (u *UI) Stop() { u.server.Stop() }

func waitHealthy(url string, limit time.Duration) error {
	client := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("web UI did not become healthy at %s within %s: %v", url, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// displayHost turns a wildcard bind address into one a browser on this machine can open.
func displayHost(host string) string {
	if host == "0.0.0.0" || host == "::" || host == "" {
		return "127.0.0.1"
	}
	return host
}
