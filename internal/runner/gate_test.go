package runner

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A held script runs only once released: its starter records the run in between.
func TestAHeldScriptRunsOnlyOnceReleased(t *testing.T) {
	s := script(t, "echo ran > ran\n")
	marker := filepath.Join(s.Sandbox, "ran")
	held, err := SpawnHeld(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Handle.Stop(0) })
	if !held.Handle.Running() {
		t.Fatal("the held wrapper is not running")
	}
	// The wrapper waits at its gate: nothing of the script happens meanwhile.
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the script ran before it was released")
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, held.Handle); code != 0 {
		t.Errorf("exit status %d", code)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the released script did not run: %v", err)
	}
}

// A script whose starter dies before releasing it never runs, and leaves no exit status:
// the starter's death closes the gate's pipe. The gate is the starter's alone: a script it
// started meanwhile (still running) does not hold it open.
func TestAScriptWhoseStarterDiesBeforeReleasingItNeverRuns(t *testing.T) {
	s := script(t, "echo ran > ran\n")
	marker := filepath.Join(s.Sandbox, "ran")
	held, err := SpawnHeld(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Handle.Stop(0) })
	other := spawn(t, script(t, "sleep 30\n"))
	if !other.Running() {
		t.Fatal("the other script is not running")
	}
	held.Abandon() // as the kernel closes a dead starter's files
	select {
	case <-held.Exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned wrapper still waits at its gate: another process holds it open")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the script ran though its starter never released it")
	}
	if code, ok := held.Handle.ExitCode(); ok {
		t.Errorf("an exit status (%d) for a script that never ran", code)
	}
}

// The gate holds under limits too (the limited wrapper).
func TestAHeldScriptUnderLimitsRunsOnlyOnceReleased(t *testing.T) {
	s := script(t, "echo ran > ran\n")
	s.Limits = Limits{Processes: 500, OpenFiles: 256}
	held, err := SpawnHeld(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Handle.Stop(0) })
	held.Abandon()
	<-held.Exited
	if _, err := os.Stat(filepath.Join(s.Sandbox, "ran")); err == nil {
		t.Error("the script ran though never released")
	}
	s2 := script(t, "echo ran > ran\n")
	s2.Limits = s.Limits
	h, _, err := Spawn(s2)
	if err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, h); code != 0 {
		t.Errorf("exit status %d", code)
	}
}
