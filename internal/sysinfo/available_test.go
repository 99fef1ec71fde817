package sysinfo

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestProcessAvailable(t *testing.T) {
	meminfo := "MemTotal:       24683584 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"
	gib := int64(1) << 30
	tests := []struct {
		name       string
		files      map[string]string
		wantBytes  int64
		wantSource string
		wantErr    string
	}{
		{"no cgroup limit (v1 huge number)", map[string]string{
			"proc/self/cgroup": "4:memory:/jobs/a\n0::/\n",
			"sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/jobs/a/memory.usage_in_bytes": "1000\n",
		}, 20000000 << 10, "MemAvailable", ""},
		{"v2 limit below MemAvailable, page cache not counted as used", map[string]string{
			"proc/self/cgroup":                 "0::/box\n",
			"sys/fs/cgroup/box/memory.max":     "8589934592\n",
			"sys/fs/cgroup/box/memory.current": "3221225472\n",
			"sys/fs/cgroup/box/memory.stat":    "anon 1\ninactive_file 1073741824\nactive_file 5\n",
		}, 8*gib - 2*gib, "/sys/fs/cgroup/box/memory.max", ""},
		{"v2 max at the process's level, limit one level up", map[string]string{
			"proc/self/cgroup":                     "0::/outer/inner\n",
			"sys/fs/cgroup/outer/inner/memory.max": "max\n",
			"sys/fs/cgroup/outer/memory.max":       "4294967296\n",
			"sys/fs/cgroup/outer/memory.current":   "1073741824\n",
		}, 3 * gib, "/sys/fs/cgroup/outer/memory.max", ""},
		{"v1 limit", map[string]string{
			"proc/self/cgroup": "9:name=systemd:/\n4:cpu,memory:/jobs/a\n",
			"sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes": "2147483648\n",
			"sys/fs/cgroup/memory/jobs/a/memory.usage_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/jobs/a/memory.stat":           "cache 9\ntotal_inactive_file 536870912\n",
		}, gib + gib/2, "/sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes", ""},
		{"over the limit: nothing left", map[string]string{
			"proc/self/cgroup":                 "0::/box\n",
			"sys/fs/cgroup/box/memory.max":     "1000\n",
			"sys/fs/cgroup/box/memory.current": "5000\n",
		}, 0, "/sys/fs/cgroup/box/memory.max", ""},
		{"unreadable cgroup files are skipped", map[string]string{
			"proc/self/cgroup":             "0::/box\n",
			"sys/fs/cgroup/box/memory.max": "garbage\n",
		}, 20000000 << 10, "MemAvailable", ""},
		{"no meminfo", map[string]string{"proc/meminfo": ""}, 0, "", "no MemAvailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"proc/meminfo": {Data: []byte(meminfo)}}
			for name, data := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			got, err := read(fsys)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Bytes != tt.wantBytes || !strings.Contains(got.Source, tt.wantSource) {
				t.Errorf("got %d bytes from %q, want %d from %q", got.Bytes, got.Source, tt.wantBytes, tt.wantSource)
			}
		})
	}
}

// TestProcessAvailableHere reads this machine's figures: positive, at most MemTotal.
func TestProcessAvailableHere(t *testing.T) {
	got, err := ProcessAvailable()
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	total, err := meminfoField(osRoot(), "MemTotal:")
	if err != nil {
		t.Fatal(err)
	}
	if got.Bytes <= 0 || got.Bytes > total {
		t.Errorf("available %d bytes of %d", got.Bytes, total)
	}
}
