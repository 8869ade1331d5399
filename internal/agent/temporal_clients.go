package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/internal/codec"
	"github.com/clusterflow/clusterflow/internal/logging"
)

// temporalClients keeps one Temporal client per connection the agent was handed. Connections are
// stored apart from run records, readable by the agent's user only, because they may hold
// an API key or a TLS key.
type temporalClients struct {
	dir string
	log *zap.Logger

	mu sync.Mutex
	// byID holds a client per connection and version of its codec key file, so that keys
	// rotated in the file are used from the next report on.
	byID     map[string]client.Client
	keyFiles map[string]string
}

func newTemporalClients(agentDir string, log *zap.Logger) *temporalClients {
	return &temporalClients{dir: filepath.Join(agentDir, "connections"), log: log, byID: map[string]client.Client{}, keyFiles: map[string]string{}}
}

// save stores the connection once and returns its ID.
func (c *temporalClients) save(conn Connection) (string, error) {
	data, err := json.Marshal(conn)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:8])
	path := filepath.Join(c.dir, id+".json")
	if _, err := os.Stat(path); err == nil {
		return id, nil
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return "", err
	}
	return id, atomicfile.Write(path, data, 0o600)
}

// get returns the client for a stored connection. Clients connect lazily, so an agent
// whose server is down still starts, and delivers once the server is back.
func (c *temporalClients) get(id string) (client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cacheKey := id
	if keyFile, ok := c.keyFiles[id]; ok {
		cacheKey = id + keyFileStamp(keyFile)
		if cl, ok := c.byID[cacheKey]; ok {
			return cl, nil
		}
	}
	data, err := os.ReadFile(filepath.Join(c.dir, id+".json"))
	if err != nil {
		return nil, fmt.Errorf("connection settings %s: %w", id, err)
	}
	var conn Connection
	if err := json.Unmarshal(data, &conn); err != nil {
		return nil, fmt.Errorf("connection settings %s: %w", id, err)
	}
	// The worker's codec, if it has one, encodes the results the agent reports.
	opts, err := conn.ToClientOptions(envconfig.ToClientOptionsRequest{IncludeRemoteCodec: true})
	if err != nil {
		return nil, fmt.Errorf("connection settings %s: %w", id, err)
	}
	if opts.HostPort == "" {
		opts.HostPort = client.DefaultHostPort
	}
	opts.Logger = logging.SDK(c.log)
	if conn.CodecKeys != "" {
		keys, err := codec.ParseKeys([]byte(conn.CodecKeys))
		if err != nil {
			return nil, fmt.Errorf("connection settings %s: codec keys: %w", id, err)
		}
		codec.ApplyKeys(&opts, keys)
	} else if err := codec.Apply(&opts, conn.CodecKeyFile); err != nil {
		return nil, fmt.Errorf("connection settings %s: %w", id, err)
	}
	cl, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, err
	}
	c.keyFiles[id] = conn.CodecKeyFile
	c.byID[id+keyFileStamp(conn.CodecKeyFile)] = cl
	return cl, nil
}

// keyFileStamp changes when the key file does: its size and time of change.
func keyFileStamp(keyFile string) string {
	if keyFile == "" {
		return ""
	}
	info, err := os.Stat(keyFile)
	if err != nil {
		return "/missing"
	}
	return fmt.Sprintf("/%d/%d", info.Size(), info.ModTime().UnixNano())
}

func (c *temporalClients) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.byID {
		cl.Close()
	}
}
