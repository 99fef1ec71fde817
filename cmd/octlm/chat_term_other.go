//go:build !unix

package main

import "os"

// prepareTerminal does nothing where there are no Unix terminals.
func prepareTerminal(*os.File) {}
