package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/codec"
)

// A long-lived agent picks up a codec key file that changed (a rotation) at its next
// report: the client it reports through is made again, with the file's keys, while an
// unchanged file keeps its client.
func TestTheAgentPicksUpRotatedCodecKeys(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "codec.keys")
	write := func(ids ...string) {
		var lines string
		for _, id := range ids {
			line, err := codec.NewKeyLine(id)
			if err != nil {
				t.Fatal(err)
			}
			lines += line + "\n"
		}
		if err := os.WriteFile(keys, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	c := newTemporalClients(dir, zap.NewNop())
	defer c.close()
	id, err := c.save(Connection{ClientConfigProfile: envconfig.ClientConfigProfile{Address: "127.0.0.1:1"}, CodecKeyFile: keys})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.get(id)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.get(id); again != first {
		t.Error("an unchanged key file made a new client")
	}
	time.Sleep(10 * time.Millisecond) // a new modification time, even on coarse clocks
	write("b", "a")
	rotated, err := c.get(id)
	if err != nil {
		t.Fatal(err)
	}
	if rotated == first {
		t.Error("after the key file changed, the agent still reports through the client made with the old keys")
	}
}
