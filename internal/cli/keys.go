package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/pflag"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/signing"
)

// SignKeyEnv names the signing key file when --sign-key is not given.
const SignKeyEnv = "CLUSTERFLOW_SIGN_KEY"

// signKeyFlag adds --sign-key to the commands that send a spec.
func signKeyFlag(fs *pflag.FlagSet, file *string) {
	fs.StringVar(file, "sign-key", os.Getenv(SignKeyEnv), "sign the spec with this private key (made by `clusterflow keys new NAME`), for hosts started with --trusted-keys; default $"+SignKeyEnv)
}

// runKeys makes signing keys: the private key goes to a file of its owner's alone, and the
// public key's line, for hosts' --trusted-keys files, to stdout.
func runKeys(_ context.Context, args []string) error {
	flags := newFlagSet("keys", "new NAME [--out FILE]")
	out := flags.String("out", "", "where to write the private key (default NAME.key; an existing file is never replaced)")
	if err := flags.Parse(args); err != nil {
		return flagError(err)
	}
	if flags.NArg() != 2 || flags.Arg(0) != "new" {
		flags.Usage()
		return apperr.Errorf(apperr.Invalid, "keys: use `keys new NAME`")
	}
	key, err := signing.NewKey(flags.Arg(1))
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	if *out == "" {
		*out = key.Name + ".key"
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return apperr.Errorf(apperr.Conflict, "--out %s: the file exists; a key is never overwritten (choose another file, or remove it)", *out)
	}
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "--out %s: %v", *out, err)
	}
	if _, err := f.Write(key.File()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Private key written to %s: keep it secret. Add this line to each host's --trusted-keys file:\n", *out)
	fmt.Println(key.PublicLine())
	return nil
}
