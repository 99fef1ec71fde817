package xla

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
)

// checkLibrary says why the shared library at path (a PJRT plugin, ONNX Runtime) cannot be
// loaded, before dlopen would find out the hard way: dlopen maps the file's segments, and
// touching a page past the end of a truncated file (a download cut short, a full disk) kills
// the process with SIGBUS, which no Go code can recover from. A missing path gives an error
// matching fs.ErrNotExist.
func checkLibrary(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case st.IsDir():
		return errors.New("is a folder, not a library file")
	case !st.Mode().IsRegular():
		return fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		return nil // Mach-O and PE: not checked
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkELF(f, st.Size())
}

// elfMachines is the ELF machine of the architectures octlm's libraries are built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkELF checks that r (size bytes) is a 64-bit little-endian ELF shared library for this
// machine whose program headers, and every segment dlopen maps, lie inside the file.
func checkELF(r io.ReaderAt, size int64) error {
	var h elf.Header64
	if size < int64(binary.Size(h)) {
		return fmt.Errorf("truncated: %d bytes, smaller than an ELF header", size)
	}
	if err := binary.Read(io.NewSectionReader(r, 0, size), binary.LittleEndian, &h); err != nil {
		return fmt.Errorf("reading the ELF header: %w", err)
	}
	if string(h.Ident[:4]) != elf.ELFMAG {
		return errors.New("invalid ELF header: not a shared library")
	}
	if elf.Class(h.Ident[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(h.Ident[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return fmt.Errorf("not a 64-bit little-endian ELF file (%s, %s)", elf.Class(h.Ident[elf.EI_CLASS]), elf.Data(h.Ident[elf.EI_DATA]))
	}
	if elf.Type(h.Type) != elf.ET_DYN {
		return fmt.Errorf("not a shared library (ELF type %s)", elf.Type(h.Type))
	}
	if want, ok := elfMachines[runtime.GOARCH]; ok && elf.Machine(h.Machine) != want {
		return fmt.Errorf("built for %s, not this machine's %s", elf.Machine(h.Machine), want)
	}
	var ph elf.Prog64
	entry := int64(binary.Size(ph))
	if int64(h.Phentsize) != entry || h.Phnum == 0 {
		return fmt.Errorf("bad program header table (%d entries of %d bytes)", h.Phnum, h.Phentsize)
	}
	if end := int64(h.Phoff) + int64(h.Phnum)*entry; h.Phoff > uint64(size) || end > size {
		return fmt.Errorf("truncated: its program headers end at byte %d, the file has %d", end, size)
	}
	loads := 0
	for i := range int64(h.Phnum) {
		if err := binary.Read(io.NewSectionReader(r, int64(h.Phoff)+i*entry, entry), binary.LittleEndian, &ph); err != nil {
			return fmt.Errorf("reading program header %d: %w", i, err)
		}
		if elf.ProgType(ph.Type) != elf.PT_LOAD && elf.ProgType(ph.Type) != elf.PT_DYNAMIC {
			continue
		}
		if elf.ProgType(ph.Type) == elf.PT_LOAD {
			loads++
		}
		if end := ph.Off + ph.Filesz; end < ph.Off || end > uint64(size) {
			return fmt.Errorf("truncated: its %s segment %d ends at byte %d, the file has %d", elf.ProgType(ph.Type), i, end, size)
		}
	}
	if loads == 0 {
		return errors.New("no loadable segment")
	}
	return nil
}
