package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// FreeAddress returns a loopback address that is free now, for a process the test starts
// later. Its port comes from below the kernel's ephemeral range (32768 and up): servers that
// bind port 0 meanwhile, such as other tests' embedded servers for their internal services,
// take ports from that range and so cannot take this one before the process binds it.
func FreeAddress() (string, error) {
	for range 100 {
		address := net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000)))
		l, err := net.Listen("tcp", address)
		if err != nil {
			continue
		}
		l.Close()
		return address, nil
	}
	return "", fmt.Errorf("no free port found between 20000 and 32000")
}
