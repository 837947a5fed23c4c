package config

import "testing"

func TestGUIDefaultsToOnForLoopbackOnly(t *testing.T) {
	on, off := true, false
	for _, c := range []struct {
		host string
		gui  *bool
		want bool
	}{
		{"127.0.0.1", nil, true}, {"localhost", nil, true}, {"::1", nil, true}, {"[::1]", nil, true}, {"127.0.0.2", nil, true},
		{"0.0.0.0", nil, false}, {"", nil, false}, {"192.168.1.10", nil, false}, {"example.com", nil, false},
		{"0.0.0.0", &on, true}, {"127.0.0.1", &off, false},
	} {
		if got := (ServerConfig{Host: c.host, GUI: c.gui}).GUIEnabled(); got != c.want {
			t.Errorf("host %q gui %v: GUIEnabled %v, want %v", c.host, c.gui, got, c.want)
		}
	}
}
