//go:build !unix

package hub

// oNoFollow and oNonBlock have no equivalent here: the Lstat checks before opening remain.
const (
	oNoFollow = 0
	oNonBlock = 0
)
