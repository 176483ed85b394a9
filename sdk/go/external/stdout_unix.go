//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package external

import "syscall"

// redirectStdout points fd 1 at stderr.
func redirectStdout() error { return syscall.Dup2(2, 1) }
