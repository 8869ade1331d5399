package runner

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// What a user leaves in the kernel (shared memory, a semaphore, a message queue) is found,
// and removed, by its user.
func TestAUsersIPCObjectsAreFoundAndRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("making another user's IPC objects needs root, as CI has")
	}
	const uid = 64999
	t.Cleanup(func() { _ = RemoveIPCOf(uid) })
	for _, what := range []string{"-M", "-S", "-Q"} {
		args := []string{"--reuid", "64999", "--regid", "64999", "--clear-groups", "ipcmk", what}
		if what == "-M" {
			args = append(args, "4096")
		} else if what == "-S" {
			args = append(args, "1")
		}
		if out, err := exec.Command("setpriv", args...).CombinedOutput(); err != nil {
			t.Fatalf("ipcmk %s as %d: %v\n%s", what, uid, err, out)
		}
	}
	held := IPCOf(uid)
	kinds := map[string]bool{}
	for _, h := range held {
		kinds[strings.Fields(h)[0]] = true
	}
	if !kinds["shm"] || !kinds["sem"] || !kinds["msg"] {
		t.Fatalf("the user's IPC objects: %v; want its shared memory, semaphore and message queue", held)
	}
	if err := RemoveIPCOf(uid); err != nil {
		t.Fatal(err)
	}
	if left := IPCOf(uid); len(left) > 0 {
		t.Errorf("left after their removal: %v", left)
	}
}
