package devbinary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheNamedBinaryMustBeOne(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{plain, filepath.Join(dir, "missing"), dir} {
		t.Setenv(Env, path)
		if got, err := (Finder{}).Find(); err == nil || !strings.Contains(err.Error(), Env+"="+path) {
			t.Errorf("%s=%s: got %q, %v; want an error naming the variable", Env, path, got, err)
		}
	}
	runnable := filepath.Join(dir, "runnable")
	if err := os.WriteFile(runnable, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, runnable)
	if got, err := (Finder{}).Find(); err != nil || got != runnable {
		t.Errorf("%s=%s: got %q, %v", Env, runnable, got, err)
	}
}

// Without a checkout (a -trimpath build, or one whose source is gone) and with nothing
// beside it or on PATH, dev says what to build.
func TestWithNothingToRunDevSaysWhatToBuild(t *testing.T) {
	t.Setenv(Env, "")
	t.Setenv("PATH", t.TempDir())
	for _, source := range []string{"", t.TempDir()} {
		_, err := Finder{SourceDir: source}.Find()
		if err == nil || !strings.Contains(err.Error(), "go build ./cmd/clusterflow ./cmd/clusterflow-dev") {
			t.Errorf("source %q: %v; want what to build", source, err)
		}
	}
}
