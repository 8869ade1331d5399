package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A log past its limit is rotated once while its writer keeps writing: the old content
// moves to FILE.1, the writer's next output starts the emptied file, and a tail taken
// from an offset the rotation left behind reads the new output rather than failing.
func TestALogPastItsLimitIsRotatedUnderItsWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "configure.stdout")
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString(strings.Repeat("old line\n", 20)); err != nil {
		t.Fatal(err)
	}
	if rotated, err := RotateLog("", path, 1000); err != nil || rotated {
		t.Fatalf("180 bytes under a limit of 1000: rotated %v, %v", rotated, err)
	}
	if rotated, err := RotateLog("", path, 100); err != nil || !rotated {
		t.Fatalf("180 bytes over a limit of 100: rotated %v, %v", rotated, err)
	}
	if _, err := w.WriteString("new line\n"); err != nil {
		t.Fatal(err)
	}
	now, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if string(now) != "new line\n" || string(old) != strings.Repeat("old line\n", 20) {
		t.Errorf("after rotation: %q and .1 %q", now, old)
	}
	if tail := readTail("", path, 180, 1024); tail != "new line\n" {
		t.Errorf("tail from an offset past the rotated file's end: %q", tail)
	}
	// Rotated again, the older .1 is replaced: at most two files.
	if _, err := w.WriteString(strings.Repeat("x", 200)); err != nil {
		t.Fatal(err)
	}
	if rotated, err := RotateLog("", path, 100); err != nil || !rotated {
		t.Fatalf("second rotation: %v %v", rotated, err)
	}
	if old, _ := os.ReadFile(path + ".1"); !strings.HasPrefix(string(old), "new line\n") {
		t.Errorf(".1 after the second rotation: %.40q", old)
	}
}
