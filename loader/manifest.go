package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/octlm/octlm/internal/fileio"
	progressbar "github.com/octlm/octlm/internal/progress"
)

// ManifestFileName is the name of the manifest file inside a checkpoint folder.
const ManifestFileName = "octlm-manifest.json"

// ManifestFormat is the value of the "format" field of manifests this package writes.
const ManifestFormat = "octlm-manifest/1"

// ErrNoManifest is returned by VerifySnapshot when no manifest applies to a folder.
var ErrNoManifest = errors.New("no manifest applies")

// Manifest lists the files of a snapshot with their sizes and SHA-256 digests; verifying it
// before any tensor is read catches truncated downloads, corrupt blobs and swapped files.
type Manifest struct {
	Format   string         `json:"format"`
	Repo     string         `json:"repo,omitempty"`     // Hub repository, when known
	Revision string         `json:"revision,omitempty"` // Hub commit, when known
	Files    []ManifestFile `json:"files"`
}

// ManifestFile is one entry of a Manifest.
type ManifestFile struct {
	Name   string `json:"name"`             // slash-separated path relative to the folder
	Size   int64  `json:"size"`             // bytes
	SHA256 string `json:"sha256,omitempty"` // lowercase hex; empty means not known yet (size only)
}

// knownManifests are shipped entries for Hub repositories, checked whenever a folder is that
// repository's snapshot. Entries without SHA-256 are checked by size only until someone
// records the digest from a verified download (run `octlm manifest` on it).
var knownManifests = map[string]Manifest{
	"Qwen/Qwen3-0.6B": {
		Format: ManifestFormat,
		Repo:   "Qwen/Qwen3-0.6B",
		Files: []ManifestFile{
			{Name: "model.safetensors", Size: 1_503_300_328}, // SHA-256 not recorded yet
			{Name: "tokenizer.json", Size: 11_422_654, SHA256: "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"},
			{Name: "tokenizer_config.json", Size: 9_732, SHA256: "d5d09f07b48c3086c508b30d1c9114bd1189145b74e982a265350c923acd8101"},
		},
	},
}

// KnownManifest returns the shipped manifest entries of a Hub repository ("Qwen/Qwen3-0.6B").
func KnownManifest(repo string) (*Manifest, bool) {
	m, ok := knownManifests[repo]
	if !ok {
		return nil, false
	}
	m.Files = slices.Clone(m.Files)
	return &m, true
}

// BuildManifest hashes every regular file under dir (following symlinks, as in a Hugging Face
// snapshot), skipping the manifest itself and hidden files and folders. Progress lines go to
// progress when it is not nil.
func BuildManifest(dir string, progress io.Writer) (*Manifest, error) {
	m := &Manifest{Format: ManifestFormat}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if name == ManifestFileName {
			return nil
		}
		st, err := os.Stat(p) // follows symlinks
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return &FormatError{Path: p, Rule: RuleNotRegularFile, Detail: st.Mode().String()}
		}
		sum, size, err := hashFile(p, progress)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, ManifestFile{Name: name, Size: size, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loader: manifest of %s: %w", dir, err)
	}
	return m, nil
}

// WriteManifest builds the manifest of dir and writes it to dir/octlm-manifest.json (through
// a temporary file renamed into place: a failed write leaves any earlier manifest whole).
// repo and revision may be empty.
func WriteManifest(dir, repo, revision string, progress io.Writer) (*Manifest, error) {
	m, err := BuildManifest(dir, progress)
	if err != nil {
		return nil, err
	}
	m.Repo, m.Revision = repo, revision
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, ManifestFileName)
	if err := fileio.WriteFile(path, append(data, '\n')); err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	return m, nil
}

// maxManifestBytes bounds a manifest file.
const maxManifestBytes = 64 << 20

// ReadManifest reads and validates a manifest file: known format, no duplicate keys or files,
// relative slash paths inside the folder, non-negative sizes, 64-hex-digit digests.
func ReadManifest(path string) (*Manifest, error) {
	data, err := fileio.ReadFile(path, maxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	m, err := parseManifest(data)
	if err != nil {
		return nil, withPath(err, path)
	}
	return m, nil
}

func parseManifest(data []byte) (*Manifest, error) {
	// Duplicate keys first (token scan), then a strict decode.
	if err := checkNoDuplicateKeys(data); err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, &FormatError{Rule: RuleManifest, Detail: err.Error()}
	}
	if m.Format != ManifestFormat {
		return nil, &FormatError{Rule: RuleManifest, Detail: fmt.Sprintf("format %q, want %q", m.Format, ManifestFormat)}
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if !ValidManifestName(f.Name) || seen[f.Name] {
			return nil, &FormatError{Tensor: f.Name, Rule: RuleManifest, Detail: "file name must be a unique relative path inside the folder"}
		}
		seen[f.Name] = true
		if f.Size < 0 {
			return nil, &FormatError{Tensor: f.Name, Rule: RuleManifest, Detail: "negative size"}
		}
		if f.SHA256 != "" {
			if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 || strings.ToLower(f.SHA256) != f.SHA256 {
				return nil, &FormatError{Tensor: f.Name, Rule: RuleManifest, Detail: "sha256 must be 64 lowercase hex digits"}
			}
		}
	}
	return &m, nil
}

// checkNoDuplicateKeys scans any JSON value for objects with a repeated key.
func checkNoDuplicateKeys(data []byte) error {
	s := newJSONScanner(data)
	var value func(ctx string) error
	value = func(ctx string) error {
		t, err := s.token(ctx)
		if err != nil {
			return err
		}
		d, ok := t.(json.Delim)
		if !ok {
			return nil
		}
		switch d {
		case '{':
			seen := map[string]bool{}
			for {
				t, err := s.token(ctx)
				if err != nil {
					return err
				}
				if t == json.Delim('}') {
					return nil
				}
				k, _ := t.(string)
				if seen[k] {
					return formatErr(ctx, RuleDuplicateKey, "key %q appears twice", k)
				}
				seen[k] = true
				if err := value(k); err != nil {
					return err
				}
			}
		case '[':
			for s.dec.More() {
				if err := value(ctx); err != nil {
					return err
				}
			}
			_, err := s.token(ctx)
			return err
		}
		return nil
	}
	if err := value(""); err != nil {
		return err
	}
	return s.end("")
}

// ValidManifestName reports whether name is a file a manifest (or a Hub snapshot) may list: a
// slash-separated path that stays inside its folder (no empty, "." or ".." part, no backslash or
// NUL, not absolute).
func ValidManifestName(name string) bool {
	if name == "" || strings.Contains(name, `\`) || strings.Contains(name, "\x00") || path.IsAbs(name) || filepath.IsAbs(name) {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// Verify checks every file of m against dir: present, the listed size and, when the digest is
// known, the listed SHA-256. Sizes are all checked before any file is hashed, so a truncated
// download fails at once. The first mismatch is returned as a *FormatError naming the file.
func (m *Manifest) Verify(dir string, progress io.Writer) error {
	for _, f := range m.Files {
		if !ValidManifestName(f.Name) {
			return &FormatError{Path: dir, Tensor: f.Name, Rule: RuleManifest, Detail: "file name escapes the folder"}
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return &FormatError{Path: p, Rule: RuleManifestMissed}
		}
		if err != nil {
			return fmt.Errorf("loader: %w", err)
		}
		if st.Size() != f.Size {
			return &FormatError{Path: p, Rule: RuleManifestSize, Detail: fmt.Sprintf("%d bytes, manifest says %d", st.Size(), f.Size)}
		}
	}
	for _, f := range m.Files {
		if f.SHA256 == "" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		sum, _, err := hashFile(p, progress)
		if err != nil {
			return err
		}
		if sum != f.SHA256 {
			return &FormatError{Path: p, Rule: RuleManifestHash, Detail: fmt.Sprintf("sha256 %s, manifest says %s", sum, f.SHA256)}
		}
	}
	return nil
}

// VerifySnapshot checks dir against every manifest that applies to it, before any tensor is
// read: the folder's own octlm-manifest.json, and the shipped entries of a known Hub repository
// when the folder is that repository's cache snapshot or its manifest names the repository.
// It returns the manifests checked, or ErrNoManifest (wrapped) when none applies.
func VerifySnapshot(dir string, progress io.Writer) ([]*Manifest, error) {
	var checks []*Manifest
	own, err := ReadManifest(filepath.Join(dir, ManifestFileName))
	switch {
	case err == nil:
		checks = append(checks, own)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	repo, _ := SnapshotRepo(dir)
	if repo == "" && own != nil {
		repo = own.Repo
	}
	if known, ok := KnownManifest(repo); ok {
		checks = append(checks, known)
	}
	if len(checks) == 0 {
		return nil, fmt.Errorf("loader: %s: %w (no %s and not a known Hub snapshot)", dir, ErrNoManifest, ManifestFileName)
	}
	for _, m := range checks {
		if err := m.Verify(dir, progress); err != nil {
			return nil, err
		}
	}
	return checks, nil
}

// SnapshotRepo returns the repository ("Org/Name") and commit when dir is a Hugging Face
// cache snapshot, .../models--Org--Name/snapshots/<commit>; empty strings otherwise.
func SnapshotRepo(dir string) (repo, commit string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", ""
	}
	snaps := filepath.Dir(abs)
	repoDir := filepath.Base(filepath.Dir(snaps))
	if filepath.Base(snaps) != "snapshots" || !strings.HasPrefix(repoDir, "models--") {
		return "", ""
	}
	return strings.Replace(strings.TrimPrefix(repoDir, "models--"), "--", "/", 1), filepath.Base(abs)
}

// hashFile returns the SHA-256 (hex) and size of a file, reporting progress for large files.
func hashFile(path string, progress io.Writer) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("loader: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("loader: %w", err)
	}
	h := sha256.New()
	var w io.Writer = h
	var bar *progressbar.Writer
	if progress != nil && st.Size() >= 64<<20 {
		bar = progressbar.NewWriter(progress, "sha256 "+filepath.Base(path), st.Size(), 0)
		w = io.MultiWriter(h, bar)
	}
	n, err := io.CopyBuffer(w, f, make([]byte, 1<<20))
	if err != nil {
		if bar != nil {
			bar.Abandon()
		}
		return "", 0, fmt.Errorf("loader: hashing %s: %w", path, err)
	}
	if bar != nil {
		bar.Finish()
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
