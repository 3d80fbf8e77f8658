package pprofaddr

import "testing"

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"0", true},
		{"127.0.0.1:6060", true},
		{"127.0.0.2:6060", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{":6060", false},
		{"0.0.0.0:6060", false},
		{"[::]:6060", false},
		{"10.0.0.5:6060", false},
		{"pod.example.com:6060", false},
		{"6060", false},
	} {
		if err := Validate(tc.addr); (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}
