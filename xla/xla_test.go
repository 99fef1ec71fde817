package xla

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// writeFile creates path (and its folders) holding text.
func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// emptyPlaces returns places that exist but hold no plugin.
func emptyPlaces(t *testing.T) Places {
	dir := t.TempDir()
	p := Places{
		PluginPath:   []string{filepath.Join(dir, "env")},
		GoXLA:        []string{filepath.Join(dir, "go-xla"), filepath.Join(dir, "go-xla", "nvidia")},
		SitePackages: []string{filepath.Join(dir, "site-packages")},
	}
	for _, d := range append(append(slices.Clone(p.PluginPath), p.GoXLA...), p.SitePackages...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(p.PluginPath[0], "libnotaplugin.so"), "x")
	return p
}

func TestOpenGoRunsGraph(t *testing.T) {
	b, info, err := Open("go")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if info.Name != Go || info.Engine != EngineGo || EngineOf(b) != EngineGo || info.Plugin != "" || !info.ExactFloat32() || b.Name() != "Go Backend" {
		t.Fatalf("Open(go): info %+v, backend %q", info, b.Name())
	}
	// sum over rows of x*x + 1, for x = [[1,2,3],[4,5,6]]: [1+4+9+3, 16+25+36+3] = [17, 80].
	out, err := graph.CallOnce(b, func(x *graph.Node) *graph.Node {
		return graph.ReduceSum(graph.AddScalar(graph.Mul(x, x), 1), -1)
	}, tensors.FromFlatDataAndDimensions([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	got := tensors.MustCopyFlatData[float32](out)
	if !reflect.DeepEqual(got, []float32{17, 80}) {
		t.Fatalf("graph on go backend = %v, want [17 80]", got)
	}
	if err := Check(b); err != nil {
		t.Fatalf("Check(go): %v", err)
	}
}

func TestOpenAuto(t *testing.T) {
	tests := []struct {
		env, wantName, wantReason string
	}{
		{"", Go, "no PJRT plugin found"},
		{"go", Go, "$GOMLX_BACKEND=go"},
		{"  ", Go, "no PJRT plugin found"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(EnvBackend, tt.env)
			b, info, err := emptyPlaces(t).Open("")
			if err != nil {
				t.Fatal(err)
			}
			defer b.Finalize()
			if info.Name != tt.wantName || !strings.Contains(info.Reason, tt.wantReason) {
				t.Fatalf("Open(\"\") with $%s=%q: %+v, want name %q, reason containing %q", EnvBackend, tt.env, info, tt.wantName, tt.wantReason)
			}
		})
	}
}

func TestAutoChoice(t *testing.T) {
	dir := t.TempDir()
	cpu := writeFile(t, filepath.Join(dir, "cpu", "pjrt_c_api_cpu_plugin.so"), "fake")
	cuda := writeFile(t, filepath.Join(dir, "cuda", "pjrt_c_api_cuda_plugin.so"), "fake")
	tests := []struct {
		name       string
		dirs       []string
		gpu        bool
		wantPath   string
		wantReason string
	}{
		{"cuda with gpu", []string{filepath.Dir(cpu), filepath.Dir(cuda)}, true, cuda, "NVIDIA GPU is present"},
		{"cuda without gpu", []string{filepath.Dir(cpu), filepath.Dir(cuda)}, false, cpu, "skipped: no NVIDIA GPU"},
		{"cpu only", []string{filepath.Dir(cpu)}, true, cpu, "CPU plugin found"},
		{"cuda only without gpu", []string{filepath.Dir(cuda)}, false, "", "no CPU plugin"},
		{"nothing", nil, true, "", "no PJRT plugin found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, why := Places{PluginPath: tt.dirs, NvidiaGPU: tt.gpu}.Auto()
			got := ""
			if pl != nil {
				got = pl.Path
			}
			if got != tt.wantPath || !strings.Contains(why, tt.wantReason) {
				t.Fatalf("Auto() = %q, %q; want %q, reason containing %q", got, why, tt.wantPath, tt.wantReason)
			}
		})
	}
}

func TestOpenAutoEnvErrors(t *testing.T) {
	p := emptyPlaces(t)
	t.Setenv(EnvBackend, "xla:cuda")
	if _, _, err := p.Open(""); !errors.Is(err, ErrNoPlugin) {
		t.Fatalf("$GOMLX_BACKEND=xla:cuda with no plugin: err %v, want ErrNoPlugin", err)
	}
	t.Setenv(EnvBackend, "tpu")
	if _, _, err := p.Open(""); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Fatalf("$GOMLX_BACKEND=tpu: err %v, want unknown backend", err)
	}
}

func TestOpenNoPluginListsSearch(t *testing.T) {
	p := emptyPlaces(t)
	for _, name := range []string{CUDA, CPU, "xla"} {
		_, _, err := p.Open(name)
		if !errors.Is(err, ErrNoPlugin) {
			t.Fatalf("Open(%q): err %v, want ErrNoPlugin", name, err)
		}
		msg := err.Error()
		want := []string{p.PluginPath[0] + " (no plugins)", p.GoXLA[0] + " (no plugins)", p.GoXLA[1],
			p.SitePackages[0] + " (no jax_plugins/*/xla_cuda_plugin.so)", "PJRT_PLUGIN_LIBRARY_PATH", "--backend go"}
		switch name {
		case CUDA:
			want = append(want, "octlm backends --install cuda", `pip install "jax[cuda13]"`)
		case CPU:
			want = append(want, "octlm backends --install cpu")
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("Open(%q) error lacks %q:\n%s", name, w, msg)
			}
		}
	}
	// Missing folders and an unset variable are reported as such.
	_, _, err := Places{GoXLA: []string{"/nonexistent/go-xla"}}.Open(CUDA)
	for _, w := range []string{"PJRT_PLUGIN_LIBRARY_PATH: not set", "/nonexistent/go-xla (missing)", "no site-packages folder found"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

func TestOpenUnknownName(t *testing.T) {
	for _, name := range []string{"gpu", "cuda", "xla:tpu", "xla:relative/plugin.so", "go,tf32", "XLA:CPU"} {
		_, _, err := emptyPlaces(t).Open(name)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", name)
		}
		if errors.Is(err, ErrNoPlugin) {
			t.Fatalf("Open(%q): %v, want a name error", name, err)
		}
		if name != "go,tf32" && !strings.Contains(err.Error(), `"go", "xla:cpu", "xla:cuda"`) {
			t.Errorf("Open(%q) error does not list valid names: %v", name, err)
		}
	}
}

// TestOpenGoOptions opens the pure-Go backend with its options (GoMLX v0.28.2 deadlocked with
// a parallelism setting, so "go" took none) and refuses an unknown one with the backend's error.
func TestOpenGoOptions(t *testing.T) {
	tests := []struct {
		name, wantErr string
	}{
		{"go,parallelism=1", ""},
		{"go,parallelism=2,ops_sequential", ""},
		{"go,tf32", `unknown option "tf32"`},
		{"go,parallelism=x", "parallelism must be a whole number from 1 to 1024"},
		{"go,parallelism=-1", "parallelism must be a whole number from 1 to 1024"},
		{"go,parallelism=0", "parallelism must be a whole number from 1 to 1024"},
		{"go,parallelism=1025", "parallelism must be a whole number from 1 to 1024"},
		{"go,parallelism", `option "parallelism" needs a value`},
		{"go,num_executors=99999999999999999999", "num_executors must be a whole number from 1 to 1024"},
		{"go,ops_sequential=1", "takes no value"},
		{"go,no_ops", "not allowed"},
		{"go,,,,", "option 1 of \",,,\" is empty"},
		{"go,", "is empty"},
		{"go,parallelism=1,", "option 2 of"},
		{"onnx,intra_op_num_threads=999999999999", "intra_op_num_threads must be a whole number from 0 to 1024"},
		{"onnx,inter_op_num_threads=-1", "inter_op_num_threads must be a whole number from 0 to 1024"},
		{"onnx,session_clones=0", "session_clones must be a whole number from 1 to 64"},
		{"onnx,execution_mode=fast", "execution_mode must be one of parallel, sequential"},
		{"onnx,cuda", "ONNX Runtime on the CPU"},
		{"onnx,/tmp/libonnxruntime.so", "ONNXRUNTIME_SHARED_LIBRARY_PATH"},
		{"onnx,threads=2", `unknown option "threads"`},
		{"onnx,,", "is empty"},
		{"xla:cpu,,", "is empty"},
	}
	for _, tt := range tests {
		b, info, err := emptyPlaces(t).Open(tt.name)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Open(%q): %v, want an error saying %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Open(%q): %v", tt.name, err)
		}
		b.Finalize()
		if info.Name != Go || !strings.HasPrefix("go,"+info.Options, tt.name) || !strings.HasPrefix(info.String(), tt.name) {
			t.Errorf("Open(%q): info %+v (%s)", tt.name, info, info)
		}
	}
}

// TestGoExecutors checks the executors octlm gives the pure-Go backend: one per core, few
// enough that a product keeps a worker per core, at most compute's default of 8, and none added
// where the name sets them.
func TestGoExecutors(t *testing.T) {
	for _, tt := range []struct{ cores, parallelism, want int }{
		{1, 0, 1}, {2, 0, 2}, {4, 0, 4}, {16, 0, 8}, {64, 0, 8},
		{2, 1, 1}, {2, 2, 1}, {4, 2, 1}, {8, 12, 5}, {2, 64, 2},
	} {
		if got := goExecutors(tt.cores, tt.parallelism); got != tt.want {
			t.Errorf("goExecutors(%d cores, parallelism %d) = %d, want %d", tt.cores, tt.parallelism, got, tt.want)
		}
	}
	want := fmt.Sprintf("num_executors=%d", goExecutors(runtime.GOMAXPROCS(0), 0))
	for _, tt := range []struct{ opts, want string }{
		{"", want},
		{"dependency_order", "dependency_order," + want},
		{"num_executors=3", "num_executors=3"},
		{"ops_sequential", "ops_sequential"},
		{"parallelism=1", "parallelism=1,num_executors=1"},
	} {
		opts, reason := goExecutorOptions(tt.opts, "asked")
		if opts != tt.want || (opts != tt.opts) != strings.Contains(reason, "one graph executor per core") {
			t.Errorf("goExecutorOptions(%q) = %q, %q; want %q", tt.opts, opts, reason, tt.want)
		}
	}
	b, info, err := emptyPlaces(t).Open(Go)
	if err != nil {
		t.Fatal(err)
	}
	b.Finalize()
	if info.Options != want {
		t.Errorf(`Open("go"): options %q, want %q`, info.Options, want)
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, "env")
	envCPU := writeFile(t, filepath.Join(env, "pjrt_c_api_cpu_plugin.so"), "fake")
	writeFile(t, filepath.Join(env, "libcudart.so.13"), "not a plugin")
	writeFile(t, filepath.Join(env, "notes.txt"), "not a plugin")
	envFile := writeFile(t, filepath.Join(dir, "direct", "pjrt_plugin_tpu.so"), "fake")

	goxla := filepath.Join(dir, "go-xla")
	versioned := writeFile(t, filepath.Join(goxla, "pjrt_c_api_cpu_v0.114.0_plugin.so"), "fake")
	if err := os.Symlink("pjrt_c_api_cpu_v0.114.0_plugin.so", filepath.Join(goxla, "pjrt_c_api_cpu_plugin.so")); err != nil {
		t.Fatal(err)
	}
	goxlaCUDA := writeFile(t, filepath.Join(goxla, "nvidia", "pjrt_c_api_cuda_plugin.so"), "fake")

	site := filepath.Join(dir, "lib", "python3.12", "site-packages")
	jax := writeFile(t, filepath.Join(site, "jax_plugins", "xla_cuda13", "xla_cuda_plugin.so"), "fake")
	writeFile(t, filepath.Join(site, "jax_plugins", "xla_cuda13", "__init__.py"), "")
	writeFile(t, filepath.Join(site, "nvidia", "cu13", "lib", "libcudart.so.13"), "fake")

	p := Places{
		PluginPath:   []string{env, envFile, filepath.Join(dir, "missing")},
		GoXLA:        []string{goxla, filepath.Join(goxla, "nvidia")},
		SitePackages: []string{site, filepath.Join(dir, "empty-site")},
	}
	got := p.Discover()
	want := []Plugin{
		{Kind: "cpu", Path: envCPU, Source: SourceEnv},
		{Kind: "tpu", Path: envFile, Source: SourceEnv},
		{Kind: "cpu", Path: filepath.Join(goxla, "pjrt_c_api_cpu_plugin.so"), Source: SourceGoXLA},
		{Kind: "cuda", Path: goxlaCUDA, Source: SourceGoXLA},
		{Kind: "cuda", Path: jax, Source: SourcePython, SitePackages: site},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Discover:\n got %+v\nwant %+v", got, want)
	}
	_ = versioned // the symlink and its target are one plugin, listed once under the first name read

	// A JAX plugin named through PJRT_PLUGIN_LIBRARY_PATH still knows its site-packages.
	p2 := Places{PluginPath: []string{filepath.Dir(jax)}}
	if got := p2.Discover(); len(got) != 1 || got[0].Kind != "cuda" || got[0].SitePackages != site || got[0].Source != SourceEnv {
		t.Fatalf("JAX plugin via PJRT_PLUGIN_LIBRARY_PATH: %+v", got)
	}
}

func TestKindOf(t *testing.T) {
	tests := map[string]string{
		"pjrt_c_api_cpu_plugin.so":          "cpu",
		"pjrt_c_api_cpu_v0.114.0_plugin.so": "cpu",
		"pjrt_c_api_cuda_plugin.so":         "cuda",
		"pjrt-plugin-cuda13.so":             "cuda",
		"pjrt_plugin_nvidia.so":             "cuda",
		"xla_cuda_plugin.so":                "cuda",
		"pjrt_c_api_tpu_plugin.so":          "tpu",
		"libcudart.so.13":                   "",
		"pjrt_c_api_cpu_plugin.so.bak":      "",
		"xla_cpu_plugin.so":                 "",
	}
	for name, want := range tests {
		if got := kindOf(name); got != want {
			t.Errorf("kindOf(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestDefaultPlacesFromEnv(t *testing.T) {
	dir := t.TempDir()
	venvSite := filepath.Join(dir, "venv", "lib", "python3.12", "site-packages")
	localSite := filepath.Join(dir, "home", ".local", "lib", "python3.11", "site-packages")
	for _, d := range []string{venvSite, localSite} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "/a/b::/c")
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("VIRTUAL_ENV", filepath.Join(dir, "venv"))
	p := DefaultPlaces()
	if !reflect.DeepEqual(p.PluginPath, []string{"/a/b", "/c"}) {
		t.Errorf("PluginPath = %q", p.PluginPath)
	}
	if len(p.GoXLA) < 2 || p.GoXLA[0] != filepath.Join(dir, "home", ".local", "lib", "go-xla") ||
		p.GoXLA[1] != filepath.Join(dir, "home", ".local", "lib", "go-xla", "nvidia") ||
		!slices.Contains(p.GoXLA, "/usr/local/lib/go-xla") {
		t.Errorf("GoXLA = %q", p.GoXLA)
	}
	for _, want := range []string{venvSite, localSite} {
		if !slices.Contains(p.SitePackages, want) {
			t.Errorf("SitePackages %q lacks %q", p.SitePackages, want)
		}
	}
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "")
	if p := DefaultPlaces(); len(p.PluginPath) != 0 {
		t.Errorf("empty PJRT_PLUGIN_LIBRARY_PATH gave %q", p.PluginPath)
	}
}

func TestFakePluginLoadError(t *testing.T) {
	dir := t.TempDir()
	fakeCPU := writeFile(t, filepath.Join(dir, "env", "pjrt_c_api_cpu_plugin.so"), strings.Repeat("this is not an ELF file\n", 10))
	p := Places{PluginPath: []string{filepath.Dir(fakeCPU)}}
	for _, name := range []string{CPU, "xla", "xla:" + fakeCPU} {
		b, _, err := p.Open(name)
		if err == nil {
			b.Finalize()
			t.Fatalf("Open(%q) of a fake plugin succeeded", name)
		}
		if errors.Is(err, ErrNoPlugin) || !strings.Contains(err.Error(), fakeCPU) || !strings.Contains(err.Error(), "invalid ELF header") {
			t.Errorf("Open(%q): error should name the file and the loader's complaint: %v", name, err)
		}
	}
	// Automatic choice does not silently fall back to "go" when a found plugin is broken.
	t.Setenv(EnvBackend, "")
	if _, _, err := p.Open(""); err == nil || !strings.Contains(err.Error(), fakeCPU) {
		t.Errorf("Open(\"\") with a broken plugin: %v, want its load error", err)
	}
	if _, _, err := p.Open("xla:" + filepath.Join(dir, "absent.so")); err == nil || !strings.Contains(err.Error(), "absent.so") {
		t.Errorf("Open of a missing path: %v", err)
	}
}

func TestELFWithoutPJRTSymbol(t *testing.T) {
	var lib string
	for _, c := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"} {
		if isFile(c) {
			lib = c
			break
		}
	}
	if lib == "" {
		t.Skip("no libm.so.6 to stand in for a shared library that is not a plugin")
	}
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pjrt_c_api_cpu_plugin.so"), string(data))
	_, _, err = Places{PluginPath: []string{dir}}.Open(CPU)
	if err == nil || !strings.Contains(err.Error(), "not a PJRT plugin: no GetPjrtApi symbol") {
		t.Fatalf("Open of a shared library without GetPjrtApi: %v", err)
	}
}

func TestFakeJAXPluginPreparesNvidia(t *testing.T) {
	site := filepath.Join(t.TempDir(), "site-packages")
	plugin := writeFile(t, filepath.Join(site, "jax_plugins", "xla_cuda13", "xla_cuda_plugin.so"), "not ELF")
	badLib := writeFile(t, filepath.Join(site, "nvidia", "cu13", "lib", "libcudart.so.13"), "not ELF")
	writeFile(t, filepath.Join(site, "nvidia", "cu13", "bin", "ptxas"), "")
	t.Setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
	t.Setenv("NVIDIA_TF32_OVERRIDE", "")

	_, _, err := Places{SitePackages: []string{site}}.Open(CUDA)
	if err == nil {
		t.Fatal("Open(xla:cuda) of a fake JAX plugin succeeded")
	}
	for _, w := range []string{plugin, SourcePython, "preload " + badLib} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	wantFlags := "--xla_dump_to=/tmp/x --xla_gpu_cuda_data_dir=" + filepath.Join(site, "nvidia", "cu13")
	if got := os.Getenv("XLA_FLAGS"); got != wantFlags {
		t.Errorf("XLA_FLAGS = %q, want %q", got, wantFlags)
	}

	if got := os.Getenv("NVIDIA_TF32_OVERRIDE"); got != "0" {
		t.Errorf("NVIDIA_TF32_OVERRIDE = %q, want 0 for exact float32", got)
	}
	t.Setenv("NVIDIA_TF32_OVERRIDE", "")
	if _, _, err := (Places{SitePackages: []string{site}}).Open(CUDA + ",tf32"); err == nil {
		t.Fatal("fake plugin loaded")
	}
	if got := os.Getenv("NVIDIA_TF32_OVERRIDE"); got != "" {
		t.Errorf("with ,tf32 NVIDIA_TF32_OVERRIDE = %q, want it left alone", got)
	}

	// A data dir the user set is kept; a missing nvidia/ folder is reported.
	t.Setenv("XLA_FLAGS", "--xla_gpu_cuda_data_dir=/mine")
	_, env, warn := prepareJAXCUDA(site)
	if len(env) != 0 || os.Getenv("XLA_FLAGS") != "--xla_gpu_cuda_data_dir=/mine" || len(warn) != 1 {
		t.Errorf("with user data dir: env %q, XLA_FLAGS %q, warnings %q", env, os.Getenv("XLA_FLAGS"), warn)
	}
	if _, _, warn := prepareJAXCUDA(t.TempDir()); len(warn) != 1 || !strings.Contains(warn[0], "nvidia") {
		t.Errorf("without nvidia/: warnings %q", warn)
	}
}

func TestCheckProductCatchesTF32(t *testing.T) {
	exact := make([]float32, checkM*checkN)
	tf32 := make([]float32, checkM*checkN)
	for i := range exact {
		// Accumulate as a float32 matmul would, with operands rounded to TF32's 10 mantissa bits for tf32.
		scale := float32(1 + (i%checkN)%2)
		a := float32(1 + checkEps)
		aTF32 := math.Float32frombits(math.Float32bits(a) &^ (1<<13 - 1))
		for range checkK {
			exact[i] += a * scale
			tf32[i] += aTF32 * scale
		}
	}
	if err := checkProduct(exact); err != nil {
		t.Fatalf("exact float32 product rejected: %v", err)
	}
	err := checkProduct(tf32)
	if err == nil || !strings.Contains(err.Error(), "TF32 would give 256") {
		t.Fatalf("TF32 product: %v, want a TF32 error", err)
	}
	if err := checkProduct(exact[1:]); err == nil {
		t.Fatal("short result accepted")
	}
}

func TestGoXLAVersionPinned(t *testing.T) {
	// goXLAPJRTMinor is copied from go-xla's pjrt_c_api.h: a go-xla upgrade must revisit it.
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/gomlx/go-xla" {
			if f[1] != goXLAVersion {
				t.Fatalf("go.mod requires go-xla %s, but goXLAVersion/goXLAPJRTMinor describe %s: update them from its pjrt/pjrt_c_api.h", f[1], goXLAVersion)
			}
			return
		}
	}
	t.Fatal("go.mod does not require github.com/gomlx/go-xla")
}

func TestWantsTF32(t *testing.T) {
	tests := map[string]bool{"": false, "tf32": true, "tf32=true": true, "tf32=1": true, "tf32=false": false,
		"notf32": false, "tf32,notf32": false, "memory_fraction=0.5,tf32": true, "tf32x": false}
	for opts, want := range tests {
		if got := wantsTF32(opts); got != want {
			t.Errorf("wantsTF32(%q) = %v, want %v", opts, got, want)
		}
	}
}

func TestMentionsTF32(t *testing.T) {
	tests := map[string]bool{"": false, "tf32": true, "tf32=false": true, "notf32": true,
		"memory_fraction=0.5,tf32=true": true, "preallocate=false": false, "tf32x": false}
	for opts, want := range tests {
		if got := mentionsTF32(opts); got != want {
			t.Errorf("mentionsTF32(%q) = %v, want %v", opts, got, want)
		}
	}
}

func TestInfoExactFloat32(t *testing.T) {
	if !(Info{Name: CUDA}).ExactFloat32() || (Info{Name: CUDA, TF32: true}).ExactFloat32() {
		t.Fatal("ExactFloat32 must be the negation of TF32")
	}
}

func TestInstallUnknown(t *testing.T) {
	err := Install("tpu", nil)
	if err == nil || !strings.Contains(err.Error(), `"cpu" "cuda"`) {
		t.Fatalf("Install(tpu): %v", err)
	}
}

func TestInstallOffline(t *testing.T) {
	// No network: every request goes to a proxy that refuses connections. This must be the process's
	// first HTTP request, since net/http reads the proxy variables once.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("NO_PROXY", "")
	var progress bytes.Buffer
	err := Install("cpu", &progress)
	if err == nil {
		t.Fatal("Install(cpu) without network succeeded")
	}
	for _, w := range []string{"install cpu plugin into " + filepath.Join(home, ".local", "lib", "go-xla"), "network", "PJRT_PLUGIN_LIBRARY_PATH"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if !strings.Contains(progress.String(), "installing the cpu PJRT plugin") {
		t.Errorf("progress = %q", progress.String())
	}
	if got := (Places{GoXLA: []string{filepath.Join(home, ".local", "lib", "go-xla")}}).Discover(); len(got) != 0 {
		t.Errorf("failed install left plugins: %+v", got)
	}
}

// sharedLibrary returns a real shared library of this machine (libm) to stand in for ONNX
// Runtime or a plugin, or skips the test.
func sharedLibrary(t *testing.T) []byte {
	t.Helper()
	for _, c := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"} {
		if data, err := os.ReadFile(c); err == nil {
			return data
		}
	}
	t.Skip("no libm.so.6 to stand in for a shared library")
	return nil
}

// TestFindONNX takes the first ONNX Runtime library that is a loadable file, in the order
// given, passing over (and naming) one that is truncated; the automatic choice picks it only
// without a PJRT plugin. $ONNXRUNTIME_SHARED_LIBRARY_PATH is never passed over: missing, a
// folder or truncated, it is the error.
func TestFindONNX(t *testing.T) {
	lib := sharedLibrary(t)
	dir := t.TempDir()
	npm := writeFile(t, filepath.Join(dir, "npm", "libonnxruntime.so.1"), string(lib))
	own := writeFile(t, filepath.Join(dir, "own", "libonnxruntime.so"), string(lib))
	truncated := writeFile(t, filepath.Join(dir, "cut", "libonnxruntime.so.1"), string(lib[:len(lib)/2]))
	p := emptyPlaces(t)
	p.ONNX = []ONNXLibrary{{filepath.Join(dir, "missing.so"), SourceNPM}, {dir, SourceNPM}, {truncated, SourceNPM}, {npm, SourceNPM}, {own, SourceONNXOwn}}
	got, skipped, err := p.FindONNX()
	if err != nil || got.Path != npm || got.Source != SourceNPM {
		t.Fatalf("FindONNX() = %+v, %v; want %s (a missing file, a folder and a truncated library passed over)", got, err, npm)
	}
	if len(skipped) != 2 || !strings.Contains(strings.Join(skipped, "\n"), truncated) || !strings.Contains(skipped[1], "truncated") {
		t.Errorf("skipped %q, want the folder and the truncated library named", skipped)
	}
	if name, why, err := p.AutoName(); err != nil || name != ONNX || !strings.Contains(why, SourceNPM) || !strings.Contains(why, truncated) {
		t.Errorf("AutoName() = %q, %q, %v; want onnx from npm, naming the truncated library", name, why, err)
	}
	p.PluginPath = []string{writeFile(t, filepath.Join(dir, "pjrt_c_api_cpu_plugin.so"), "fake")}
	if name, _, _ := p.AutoName(); name != CPU {
		t.Errorf("AutoName() with a CPU plugin = %q, want %q", name, CPU)
	}
	p.ONNX = p.ONNX[:3]
	p.PluginPath = nil
	if name, why, err := p.AutoName(); err != nil || name != Go || !strings.Contains(why, truncated) {
		t.Errorf("AutoName() with nothing usable = %q, %q, %v; want go, naming the truncated library", name, why, err)
	}
	_, _, err = p.Open(ONNX)
	if !errors.Is(err, ErrONNXNotFound) || !strings.Contains(err.Error(), ONNXInstallCommand) || !strings.Contains(err.Error(), truncated) {
		t.Errorf("Open(onnx) without a library: %v, want not found with the install command and the truncated file", err)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "missing.so"), "folder": dir, "truncated": truncated} {
		p.ONNX = []ONNXLibrary{{path, SourceONNXEnv}, {npm, SourceNPM}}
		for what, err := range map[string]error{
			"FindONNX": func() error { _, _, err := p.FindONNX(); return err }(),
			"AutoName": func() error { _, _, err := p.AutoName(); return err }(),
			"Open":     func() error { _, _, err := p.Open(ONNX); return err }(),
		} {
			if err == nil || errors.Is(err, ErrONNXNotFound) || !strings.Contains(err.Error(), SourceONNXEnv) || !strings.Contains(err.Error(), path) {
				t.Errorf("$%s %s: %s gave %v, want an error naming the variable and %s", SourceONNXEnv, name, what, err, path)
			}
		}
	}
}

// TestCheckELF: a shared library cut anywhere inside its program headers or loaded segments
// is refused before dlopen (which would die of SIGBUS touching the missing pages); the whole
// library passes.
func TestCheckELF(t *testing.T) {
	lib := sharedLibrary(t)
	if err := checkELF(bytes.NewReader(lib), int64(len(lib))); err != nil {
		t.Fatalf("the whole library: %v", err)
	}
	for _, n := range []int{0, 4, 63, 64, 100, 1000, 4096, len(lib) / 4, len(lib) / 2, len(lib) * 3 / 4} {
		if err := checkELF(bytes.NewReader(lib[:n]), int64(n)); err == nil {
			t.Errorf("cut to %d of %d bytes: accepted", n, len(lib))
		}
	}
	notSO := append([]byte{}, lib...)
	notSO[16] = 2 // e_type ET_EXEC
	if err := checkELF(bytes.NewReader(notSO), int64(len(notSO))); err == nil || !strings.Contains(err.Error(), "not a shared library") {
		t.Errorf("an executable: %v", err)
	}
	if err := checkELF(strings.NewReader(strings.Repeat("MZ not ELF ", 20)), 220); err == nil || !strings.Contains(err.Error(), "invalid ELF header") {
		t.Errorf("not ELF: %v", err)
	}
}

// TestOpenONNX loads ONNX Runtime where DefaultPlaces finds it (CI installs it from npm) and
// checks a float32 matmul on it.
func TestOpenONNX(t *testing.T) {
	p := DefaultPlaces()
	if _, _, err := p.FindONNX(); err != nil {
		t.Skip("no ONNX Runtime library found; install it with: " + ONNXInstallCommand)
	}
	b, info, err := p.Open(ONNX + ",intra_op_num_threads=1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if info.Name != ONNX || info.Engine != EngineONNX || info.ONNXVersion == "" || info.Options != "intra_op_num_threads=1,cpu_mem_arena=false,mem_pattern=false" {
		t.Errorf("info %+v", info)
	}
	if err := Check(b); err != nil {
		t.Error(err)
	}
}

// TestPreloadRefusesTruncated: a truncated NVIDIA library beside a JAX CUDA plugin is not
// loaded (dlopen could die of SIGBUS on it); the warning says why.
func TestPreloadRefusesTruncated(t *testing.T) {
	lib := sharedLibrary(t)
	site := filepath.Join(t.TempDir(), "site-packages")
	cut := writeFile(t, filepath.Join(site, "nvidia", "cu13", "lib", "libcudart.so.13"), string(lib[:len(lib)/2]))
	loaded, _, warnings := prepareJAXCUDA(site)
	if len(loaded) != 0 || len(warnings) != 1 || !strings.Contains(warnings[0], cut) || !strings.Contains(warnings[0], "truncated") {
		t.Errorf("loaded %q, warnings %q; want nothing loaded and %s named truncated", loaded, warnings, cut)
	}
}

// TestEngineOf: the kind of engine by the backend's type, with a name for each.
func TestEngineOf(t *testing.T) {
	b, _, err := Open("go,parallelism=1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	for _, tt := range []struct {
		b    compute.Backend
		want Engine
		name string
	}{{b, EngineGo, "go"}, {nil, EngineOther, "other"}} {
		if got := EngineOf(tt.b); got != tt.want || got.String() != tt.name {
			t.Errorf("EngineOf(%v) = %v, want %v", tt.b, got, tt.want)
		}
	}
	for e, name := range map[Engine]string{EngineONNX: "onnx", EngineXLA: "xla"} {
		if e.String() != name {
			t.Errorf("%d.String() = %q, want %q", e, e.String(), name)
		}
	}
}
