//go:build !unix

package temporalserver

// lockDataDir is a no-op where flock is unavailable: nothing stops two
// servers from sharing a data directory there.
func lockDataDir(string) (release func(), err error) { return func() {}, nil }
