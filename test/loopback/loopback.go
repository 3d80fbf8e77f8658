// Package loopback picks the loopback ports of the servers that the tests start: the
// fleet's (test/fleet) and the simulated hub's (test/sim).
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// handedOut holds every port FreePorts returned in this process: a port is free when it
// is picked, but its server may start much later (the addon's manager, after helm
// installs its chart), and another server picked meanwhile must not get it too.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePorts reserves n distinct free loopback ports below the kernel's ephemeral range, for
// servers that the caller starts next. A port of that range, released before its server
// binds it, can meanwhile become the local end of any client connection on the machine,
// and stay so as long as a watch does: the fleet's stand-in Pods keep their ports across
// restarts, and one such Pod restarted for minutes with "address already in use". Below
// the range only another server can take it, and FreePorts never hands out a port twice
// in one process: the fleet's argocd-server once got the port picked for the manager's
// metrics before the manager started, and the manager restarted for the whole run.
func FreePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	low := ephemeralPortsStart()
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("find %d free ports in [%d, %d): %d found", n, minPort, low, len(ports))
		}
		port := minPort + rand.IntN(low-minPort)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	for _, port := range ports {
		handedOut.ports[port] = true
	}
	return ports, nil
}

// minPort is the lowest port FreePorts takes: above the well-known and most registered
// services.
const minPort = 20000

// ephemeralPortsStart is the first port of the kernel's ephemeral range, where it picks
// the local ports of client connections; 32768, Linux's default, when the range cannot be
// read or leaves fewer than 1,000 ports above minPort.
func ephemeralPortsStart() int {
	const fallback = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return fallback
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= minPort+1000 {
		return fallback
	}
	return low
}
