package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestReadFindsTheLinkedModules(t *testing.T) {
	info := Read()
	if info == nil {
		t.Skip("test binary without build information")
	}
	if m := Module(info, "github.com/gomlx/gomlx"); m != nil {
		t.Errorf("gomlx is not linked into this package's test, yet Module found %v", m)
	}
	if m := Module(info, info.Main.Path); m != &info.Main {
		t.Errorf("Module(main) = %v, want the main module", m)
	}
}

func TestRevisionAndVersion(t *testing.T) {
	info := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/octlm/octlm", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "github.com/gomlx/gomlx", Version: "v0.28.16"},
			{Path: "github.com/gomlx/compute", Version: "v0.1.14", Replace: &debug.Module{Path: "../compute", Version: ""}},
			{Path: "github.com/gomlx/go-xla", Version: "v0.4.13", Replace: &debug.Module{Path: "github.com/fork/go-xla", Version: "v0.4.14"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}},
	}
	if rev, mod := Revision(info); rev != "0123456789abcdef" || !mod {
		t.Errorf("Revision = %q, %v", rev, mod)
	}
	tests := map[string]string{"github.com/gomlx/gomlx": "v0.28.16", "github.com/gomlx/compute": "v0.1.14", "github.com/gomlx/go-xla": "v0.4.14"}
	for path, want := range tests {
		if got := Version(Module(info, path)); got != want {
			t.Errorf("Version(%s) = %q, want %q", path, got, want)
		}
	}
	if Module(info, "example.com/none") != nil {
		t.Error("an unlinked module was found")
	}
}
