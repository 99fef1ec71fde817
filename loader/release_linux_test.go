package loader

import (
	"bufio"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// mappedKB is the resident size, in kB, of this process's mappings of path (/proc/self/smaps).
func mappedKB(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	total, inside := 0, false
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4: // a mapping's first line
			inside = len(fields) >= 6 && fields[len(fields)-1] == path
		case inside && len(fields) >= 2 && fields[0] == "Rss:":
			kb, _ := strconv.Atoi(fields[1])
			total += kb
		}
	}
	return total
}

// TestReleaseDropsMappedPages reads a tensor of a mapped file in many small ranges, as the
// pieces of a split weight are read, and checks that Release leaves none of its pages resident
// in this process, and that Release refuses a tensor of another file.
func TestReleaseDropsMappedPages(t *testing.T) {
	const n = 4 << 20 // 8 MiB of BF16
	raw := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(raw[2*i:], Float32ToBFloat16(float32(i%1000)))
	}
	path := filepath.Join(t.TempDir(), "release.safetensors")
	if err := WriteFile(path, []WriteTensor{{"w", BF16, []int{n}, raw}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.data == nil {
		t.Skip("the file is read, not mapped")
	}
	ti, _ := f.Lookup("w")
	piece := make([]float32, 3000) // ranges that start and end mid-page
	for first := 0; first+len(piece) <= n; first += len(piece) {
		if err := f.ReadFloat32Range(ti, first, piece); err != nil {
			t.Fatal(err)
		}
	}
	before := mappedKB(t, path)
	if err := f.Release(ti); err != nil {
		t.Fatal(err)
	}
	after := mappedKB(t, path)
	t.Logf("mapped pages of the file resident after the ranges: %d kB, after Release: %d kB", before, after)
	if after > 8 { // at most the header's page and one more
		t.Errorf("after Release %d kB of the file stay resident", after)
	}
	other := TensorInfo{Name: "w", DType: BF16, Shape: []int{n}, Offset: ti.Offset + 2, Size: ti.Size}
	if err := f.Release(other); err == nil {
		t.Errorf("Release of a tensor not in the file: no error")
	}
}
