// Package buildinfo reads what a binary records of how it was built: the versions of octlm and
// of the modules that decide what it computes (GoMLX, its compute backends, go-xla), and the VCS
// revision of a build inside the repository.
package buildinfo

import "runtime/debug"

// Read returns the running binary's build information, or nil when it carries none.
func Read() *debug.BuildInfo {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return info
}

// Revision returns the VCS revision the build recorded ("" when none) and whether the work tree
// had uncommitted changes.
func Revision(info *debug.BuildInfo) (revision string, modified bool) {
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified
}

// Module returns the module of path among the main module and its dependencies, or nil when
// it is not linked.
func Module(info *debug.BuildInfo, path string) *debug.Module {
	if info.Main.Path == path {
		return &info.Main
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d
		}
	}
	return nil
}

// Version is the version of m that was linked: its replacement's when it is replaced by another
// version, else its own ("" when unknown).
func Version(m *debug.Module) string {
	if m.Replace != nil && m.Replace.Version != "" {
		return m.Replace.Version
	}
	return m.Version
}
