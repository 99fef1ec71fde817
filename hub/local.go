package hub

import (
	"os"
	"path/filepath"
	"strings"
)

// expandHome turns a leading "~/" (a path quoted past the shell) into the home folder.
func expandHome(name string) string {
	if name == "~" || strings.HasPrefix(name, "~/") {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			return filepath.Join(home, strings.TrimPrefix(name, "~"))
		}
	}
	return name
}

// looksLocal reports whether name, which is no existing folder, is still meant as a local
// path rather than a Hub name: it starts with ".", "/" or "~", or the folder it would sit in
// exists here (testdata/tiny-qwen3-nope). Such a name gets a "no such folder" error, not a
// request to the Hub.
func looksLocal(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "~") || filepath.IsAbs(name) {
		return true
	}
	parent := filepath.Dir(filepath.Clean(name))
	if parent == "." {
		return false
	}
	st, err := os.Stat(parent)
	return err == nil && st.IsDir()
}
