package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralPortsStart()
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range ports {
		if port < minPort || port >= low {
			t.Errorf("port %d is outside [%d, %d)", port, minPort, low)
		}
		if seen[port] {
			t.Errorf("port %d twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Errorf("port %d is not free: %v", port, err)
			continue
		}
		l.Close()
	}
}

// TestFreePortsNeverTwice: ports handed out and not bound yet (their servers start later)
// are never handed out again, however many calls follow.
func TestFreePortsNeverTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		ports, err := FreePorts(5)
		if err != nil {
			t.Fatal(err)
		}
		for _, port := range ports {
			if seen[port] {
				t.Fatalf("port %d handed out twice", port)
			}
			seen[port] = true
		}
	}
}
