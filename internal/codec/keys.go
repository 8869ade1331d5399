// Package codec is clusterflow's payload codec: every payload a clusterflow client or worker
// sends to Temporal is encrypted with AES-256-GCM under a key the operator holds, so the
// server, its database, exports and the Web UI hold only ciphertext. It follows Temporal's
// convention: the encoding "binary/encrypted" and the key's ID in the payload's metadata.
//
// Keys live in a file, one "ID BASE64" a line. The first key encrypts; every key decrypts,
// so a key rotates by putting the new one first and keeping the old one until no history
// that needs it is kept.
package codec

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"

	"github.com/clusterflow/clusterflow/internal/keyfile"
)

// KeyFileEnv names the key file when --codec-key-file is not given.
const KeyFileEnv = "CLUSTERFLOW_CODEC_KEY_FILE"

// keySize is AES-256's.
const keySize = 32

// maxKeyFile bounds what is read of a key file: thousands of keys.
const maxKeyFile = 1 << 20

var validID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Keys are the keys of a key file, the encrypting one first.
type Keys struct {
	ids  []string
	aead map[string]cipher.AEAD
}

// EncryptingID is the ID of the key that encrypts.
func (k *Keys) EncryptingID() string { return k.ids[0] }

// IDs are every key's ID, the encrypting one first.
func (k *Keys) IDs() []string { return append([]string(nil), k.ids...) }

// LoadKeys reads a key file. It must be readable by its owner only, as a private key is.
func LoadKeys(path string) (*Keys, error) {
	data, err := keyfile.ReadPrivate(path, "codec key file", maxKeyFile)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("codec key file %s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys reads the lines of a key file; # starts a comment.
func ParseKeys(data []byte) (*Keys, error) {
	keys := &Keys{aead: map[string]cipher.AEAD{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want ID BASE64, got %d fields", n, len(fields))
		}
		id := fields[0]
		if !validID.MatchString(id) {
			return nil, fmt.Errorf("line %d: key ID %q must be 1 to 64 of A-Z a-z 0-9 . _ -", n, id)
		}
		if _, dup := keys.aead[id]; dup {
			return nil, fmt.Errorf("line %d: key ID %q is used twice", n, id)
		}
		raw, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil || len(raw) != keySize {
			return nil, fmt.Errorf("line %d: key %s must be %d random bytes in base64 (make one with `clusterflow codec-key new ID`)", n, id, keySize)
		}
		aead, err := newAEAD(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		keys.ids = append(keys.ids, id)
		keys.aead[id] = aead
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys.ids) == 0 {
		return nil, fmt.Errorf("no keys in it (make one with `clusterflow codec-key new ID`)")
	}
	return keys, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// NewKeyLine makes a random key and returns its line for a key file.
func NewKeyLine(id string) (string, error) {
	if !validID.MatchString(id) {
		return "", fmt.Errorf("key ID %q must be 1 to 64 of A-Z a-z 0-9 . _ -", id)
	}
	raw := make([]byte, keySize)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return id + " " + base64.StdEncoding.EncodeToString(raw), nil
}
