package external

import "syscall"

// redirectStdout points fd 1 at stderr.
func redirectStdout() error { return syscall.Dup3(2, 1, 0) }
