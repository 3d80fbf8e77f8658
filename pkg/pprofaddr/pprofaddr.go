// Package pprofaddr holds the rule for where the manager and the agent may serve Go's
// net/http/pprof: on loopback only. pprof has no authentication, and its profiles and
// command line tell a lot about the process; on loopback only someone in the Pod's
// network namespace reaches it, e.g. through `kubectl port-forward`, which the
// apiserver authorizes (create on pods/portforward).
package pprofaddr

import (
	"fmt"
	"net"
)

// Validate accepts an address that disables pprof ("" or "0") or binds it to a loopback
// address (127.0.0.1:6060, [::1]:6060, localhost:6060), and refuses any other, such as
// ":6060", which would serve it on every interface.
func Validate(addr string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("the pprof address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("the pprof address %q is not a loopback address: pprof serves without authentication, so bind it to 127.0.0.1 and reach it with kubectl port-forward", addr)
}
