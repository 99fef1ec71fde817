//go:build unix

package fileio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		want       string
		wantErr    error
	}{
		{"small file", write("ok.json", "{}"), "{}", nil},
		{"at the limit", write("limit.json", strings.Repeat("x", 16)), strings.Repeat("x", 16), nil},
		{"over the limit", write("big.json", strings.Repeat("x", 17)), "", ErrTooLarge},
		{"FIFO", fifo, "", ErrNotRegular},
		{"symlink to /dev/zero", zero, "", ErrNotRegular},
		{"folder", dir, "", ErrNotRegular},
		{"missing", filepath.Join(dir, "none"), "", fs.ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan struct{})
			var data []byte
			var err error
			go func() { data, err = ReadFile(c.path, 16); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadFile blocked")
			}
			if c.wantErr == nil {
				if err != nil || string(data) != c.want {
					t.Fatalf("got %q, %v; want %q", data, err, c.want)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("got %q, %v; want an error matching %v", data, err, c.wantErr)
			}
			if !strings.Contains(err.Error(), c.path) {
				t.Errorf("error %q does not name %s", err, c.path)
			}
		})
	}
}

func TestOutputKeepsTargetUntilCommit(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := Create(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Fatalf("target changed before Commit: %q", b)
	}
	o.Abort()
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Fatalf("target changed by Abort: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("Abort left %d entries, want only the target", len(entries))
	}
	o, err = Create(target)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort()
	if _, err := o.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Fatalf("after Commit the target holds %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("Commit left %d entries, want only the target", len(entries))
	}
}

func TestOutputErrors(t *testing.T) {
	if _, err := Create(filepath.Join(t.TempDir(), "missing", "x")); err == nil {
		t.Error("Create in a missing folder succeeded")
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	o, err := Create("/dev/full")
	if err != nil {
		t.Fatalf("Create(/dev/full): %v", err)
	}
	_, werr := o.WriteString("x")
	cerr := o.Commit()
	if werr == nil && cerr == nil {
		t.Fatal("writing /dev/full reported no error")
	}
	if st, err := os.Stat("/dev/full"); err != nil || st.Mode().IsRegular() {
		t.Fatalf("/dev/full was replaced: %v %v", st, err)
	}
}

func TestCheckWritableDir(t *testing.T) {
	dir := t.TempDir()
	if err := CheckWritableDir(filepath.Join(dir, "new", "sub")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if err := CheckWritableDir(filepath.Join(file, "sub")); err == nil {
		t.Error("a folder under a file was accepted")
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		if err := CheckWritableDir(ro); err == nil {
			t.Error("a read-only folder was accepted")
		}
	}
}
