//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package external

import "os"

// redirectStdout cannot repoint fd 1 here: os.Stdout alone leads to stderr.
func redirectStdout() error {
	realStdout = os.Stderr
	return nil
}
