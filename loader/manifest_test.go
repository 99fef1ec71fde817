package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	writeText(t, filepath.Join(dir, "config.json"), `{"a":1}`)
	writeShard(t, filepath.Join(dir, SingleFileName), "x", "y")
	os.Mkdir(filepath.Join(dir, ".cache"), 0o755)
	writeText(t, filepath.Join(dir, ".cache", "ignored"), "x")
	m, err := WriteManifest(dir, "Org/Name", "abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 2 || m.Files[0].Name != "config.json" || m.Files[0].Size != 7 ||
		m.Files[0].SHA256 != "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862" {
		t.Fatalf("manifest %+v", m.Files)
	}
	checks, err := VerifySnapshot(dir, nil)
	if err != nil || len(checks) != 1 || checks[0].Repo != "Org/Name" {
		t.Fatalf("VerifySnapshot: %v %v", checks, err)
	}
	// Same size, one byte changed: only the digest can tell.
	writeText(t, filepath.Join(dir, "config.json"), `{"a":2}`)
	assertRule(t, dir, RuleManifestHash, "config.json")
	writeText(t, filepath.Join(dir, "config.json"), `{"a":22}`)
	assertRule(t, dir, RuleManifestSize, "config.json")
	os.Remove(filepath.Join(dir, "config.json"))
	assertRule(t, dir, RuleManifestMissed, "config.json")
}

func assertRule(t *testing.T, dir string, rule Rule, file string) {
	t.Helper()
	_, err := VerifySnapshot(dir, nil)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Rule != rule || !strings.Contains(err.Error(), file) {
		t.Fatalf("got %v, want rule %q naming %s", err, rule, file)
	}
}

func TestVerifySnapshotNone(t *testing.T) {
	if _, err := VerifySnapshot(t.TempDir(), nil); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("got %v, want ErrNoManifest", err)
	}
}

// TestKnownManifestQwen checks the shipped Qwen3-0.6B entries against the real tokenizer
// fixtures in a cache-shaped folder, and that a wrong-size model.safetensors is refused.
func TestKnownManifestQwen(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "models--Qwen--Qwen3-0.6B", "snapshots", "c1899de289a04d12100db370d81485cdf75e47ca")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(fixture(t, "qwen3-tokenizer", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snap, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeShard(t, filepath.Join(snap, SingleFileName), "x")
	assertRule(t, snap, RuleManifestSize, SingleFileName)
	if err := os.Truncate(filepath.Join(snap, SingleFileName), 1_503_300_328); err != nil {
		t.Fatal(err)
	}
	checks, err := VerifySnapshot(snap, nil)
	if err != nil || len(checks) != 1 || checks[0].Repo != "Qwen/Qwen3-0.6B" {
		t.Fatalf("VerifySnapshot: %v, %v", checks, err)
	}
	// A tokenizer with the right size but other bytes fails on the digest.
	p := filepath.Join(snap, "tokenizer_config.json")
	data, _ := os.ReadFile(p)
	data[100] ^= 1
	os.WriteFile(p, data, 0o644)
	assertRule(t, snap, RuleManifestHash, "tokenizer_config.json")
}

func TestReadManifestRejects(t *testing.T) {
	const sum = "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
	tests := map[string]string{
		"not JSON":       `{"format":`,
		"wrong format":   `{"format":"other","files":[]}`,
		"unknown field":  `{"format":"octlm-manifest/1","files":[],"x":1}`,
		"duplicate key":  `{"format":"octlm-manifest/1","files":[],"files":[]}`,
		"duplicate file": `{"format":"octlm-manifest/1","files":[{"name":"a","size":1},{"name":"a","size":1}]}`,
		"parent path":    `{"format":"octlm-manifest/1","files":[{"name":"../a","size":1}]}`,
		"absolute path":  `{"format":"octlm-manifest/1","files":[{"name":"/etc/passwd","size":1}]}`,
		"negative size":  `{"format":"octlm-manifest/1","files":[{"name":"a","size":-1}]}`,
		"short digest":   `{"format":"octlm-manifest/1","files":[{"name":"a","size":1,"sha256":"abc"}]}`,
		"upper digest":   `{"format":"octlm-manifest/1","files":[{"name":"a","size":1,"sha256":"` + strings.ToUpper(sum) + `"}]}`,
		"trailing data":  `{"format":"octlm-manifest/1","files":[]} x`,
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), ManifestFileName)
			writeText(t, p, text)
			_, err := ReadManifest(p)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), p) {
				t.Fatalf("got %v, want a format error naming %s", err, p)
			}
		})
	}
}
