//go:build unix

package hub

import "syscall"

// oNoFollow makes opening a symbolic link fail (ELOOP) instead of opening its target.
const oNoFollow = syscall.O_NOFOLLOW

// oNonBlock keeps opening a FIFO from waiting for the other end.
const oNonBlock = syscall.O_NONBLOCK
