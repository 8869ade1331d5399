package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestReservedPortsAreDistinctAndBindable(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		port, err := Reserve("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("reserved port %d cannot be bound: %v", port, err)
		}
		l.Close()
	}
}

func TestAHeldPortIsNotLockedAgain(t *testing.T) {
	port, err := Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if lock(port) {
		t.Fatalf("port %d locked a second time", port)
	}
}
