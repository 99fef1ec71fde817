package main

import "github.com/octlm/octlm/internal/termsafe"

// printable escapes what a terminal would act on instead of showing: control characters (C0,
// DEL, C1, among them ESC and CSI), bidirectional overrides and bytes that are not UTF-8, as
// \xNN or \uNNNN (see termsafe). Names read from files (tensor names, metadata, file names)
// pass through it before they are printed, so a crafted header cannot retitle, clear or
// recolour the terminal.
func printable(s string) string { return termsafe.Name(s) }

// printableText is printable for multi-line messages: newlines and tabs are kept.
func printableText(s string) string { return termsafe.Text(s) }
