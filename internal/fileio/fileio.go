// Package fileio reads and writes files so that bad input cannot hang or exhaust the process
// and no output is ever left half-written: small files are read only when they are regular
// files within a size limit (never a FIFO that blocks or /dev/zero that never ends), and
// outputs are written beside their target and renamed into place when complete. Temporaries
// carry the writer's PID, so that those of a killed process are removed by a later run.
//
// It knows nothing of what the files hold.
package fileio

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrTooLarge is matched (errors.Is) by the error ReadFile returns for a file above its limit.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is matched (errors.Is) by the error ReadFile returns for a FIFO, device,
// socket or folder.
var ErrNotRegular = errors.New("not a regular file")

// ReadFile reads the regular file at path (symlinks followed) when it holds at most limit
// bytes. A FIFO, device or folder is refused without blocking; a file above limit, or one
// that grows past it while being read, is refused without reading more than limit+1 bytes.
// A missing file gives an error matching fs.ErrNotExist.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := OpenRead(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, st.Mode().Type())}
	}
	if st.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTooLarge, st.Size(), limit)}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: grew past the %d bytes allowed while being read", ErrTooLarge, limit)}
	}
	return data, nil
}

// OpenRead opens path for reading without blocking, even when it is a FIFO with no writer;
// check with Stat that it is a regular file before reading.
func OpenRead(path string) (*os.File, error) { return openNonBlocking(path) }

// Output is a file being written: a temporary file beside the target, renamed over it by
// Commit. Until then the target is untouched; Abort (or a failed Commit) removes the
// temporary file. A target that exists and is not a regular file (a device such as
// /dev/stdout or /dev/full, a FIFO) is written in place instead, since renaming over it would
// replace the device, and every write error is still reported.
type Output struct {
	*os.File
	target string
	direct bool
	done   bool
}

// Create starts writing path. It fails at once when the folder cannot take a new file, so a
// bad destination is reported before any work is done.
func Create(path string) (*Output, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, &fs.PathError{Op: "create", Path: path, Err: errors.New("is a folder")}
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &Output{File: f, target: path, direct: true}, nil
	}
	f, err := CreateTemp(path, "tmp")
	if err != nil {
		return nil, fmt.Errorf("cannot write beside %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		Release(f.Name())
		return nil, err
	}
	return &Output{File: f, target: path}, nil
}

// Target is the path being written.
func (o *Output) Target() string { return o.target }

// Commit flushes the file to disk and renames it over the target.
func (o *Output) Commit() error {
	if o.done {
		return fmt.Errorf("%s: already committed or aborted", o.target)
	}
	o.done = true
	if o.direct {
		return o.File.Close()
	}
	err := o.File.Sync()
	if cerr := o.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.File.Name(), o.target)
	}
	if err != nil {
		os.Remove(o.File.Name())
	}
	Release(o.File.Name())
	if err != nil {
		return fmt.Errorf("writing %s: %w", o.target, err)
	}
	return nil
}

// Abort drops what was written and leaves the target as it was. It is safe to call after
// Commit (it then does nothing), so `defer out.Abort()` covers every early return.
func (o *Output) Abort() {
	if o.done {
		return
	}
	o.done = true
	o.File.Close()
	if !o.direct {
		os.Remove(o.File.Name())
		Release(o.File.Name())
	}
}

// WriteFile writes data to path through Create and Commit: the target is replaced whole or
// not at all.
func WriteFile(path string, data []byte) error {
	o, err := Create(path)
	if err != nil {
		return err
	}
	defer o.Abort()
	if _, err := o.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return o.Commit()
}

// CheckWritableDir creates dir when missing and checks that a new file can be made in it,
// so a command can fail before computing what it would write there.
func CheckWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := CreateTemp(dir+string(os.PathSeparator)+"octlm-write-check", "tmp")
	if err != nil {
		return fmt.Errorf("cannot write into %s: %w", dir, err)
	}
	f.Close()
	return RemoveTemp(f.Name())
}
