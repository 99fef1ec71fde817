package xla

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// jaxNvidiaLibs is what JAX's jax_plugins/xla_cuda*/__init__.py (_load_nvidia_libraries) loads, in
// order, from site-packages/nvidia/<module>/lib before it registers the CUDA plugin: once loaded, the
// plugin's own lookups of these sonames find them. Both the CUDA 12 and CUDA 13 wheel layouts are
// listed; missing files are skipped, as JAX does.
var jaxNvidiaLibs = []struct{ module, lib string }{
	{"cuda_runtime", "libcudart.so.12"},
	{"cu13", "libcudart.so.13"},
	{"cuda_nvrtc", "libnvrtc.so.12"},
	{"cu13", "libnvrtc.so.13"},
	{"cublas", "libcublas.so.12"},
	{"cublas", "libcublasLt.so.12"},
	{"cu13", "libcublas.so.13"},
	{"cu13", "libcublasLt.so.13"},
	{"nccl", "libnccl.so.2"},
	{"cuda_cupti", "libcupti.so.12"},
	{"cu13", "libcupti.so.13"},
	{"cusparse", "libcusparse.so.12"},
	{"cu13", "libcusparse.so.12"},
	{"cusolver", "libcusolver.so.11"},
	{"cu13", "libcusolver.so.12"},
	{"cufft", "libcufft.so.11"},
	{"cu13", "libcufft.so.12"},
	{"nvshmem", "libnvshmem_host.so.3"},
	{"cudnn", "libcudnn.so.9"},
}

// prepareJAXCUDA readies the process for a JAX CUDA plugin in site-packages: it loads the NVIDIA
// libraries from site-packages/nvidia as JAX does, and points XLA at the CUDA toolkit folder that holds
// ptxas and libdevice (--xla_gpu_cuda_data_dir) unless XLA_FLAGS already names one. It returns the
// libraries loaded, the environment set and warnings; nothing here is fatal, the plugin load decides.
func prepareJAXCUDA(sitePackages string) (loaded, env, warnings []string) {
	nvidia := filepath.Join(sitePackages, "nvidia")
	if !isDir(nvidia) {
		warnings = append(warnings, fmt.Sprintf("%s is missing: the plugin needs the nvidia-* wheels (pip install \"jax[cuda13]\") or system CUDA libraries", nvidia))
		return nil, nil, warnings
	}
	for _, l := range jaxNvidiaLibs {
		path := filepath.Join(nvidia, l.module, "lib", l.lib)
		if !isFile(path) {
			continue
		}
		if err := dlopen(path); err != nil {
			warnings = append(warnings, fmt.Sprintf("preload %s: %v", path, err))
			continue
		}
		loaded = append(loaded, path)
	}
	const flag = "--xla_gpu_cuda_data_dir"
	flags := os.Getenv("XLA_FLAGS")
	if strings.Contains(flags, flag) {
		return loaded, env, warnings
	}
	for _, root := range []string{"cu13", "cuda_nvcc"} {
		dir := filepath.Join(nvidia, root)
		if isFile(filepath.Join(dir, "bin", "ptxas")) {
			flags = strings.TrimSpace(flags + " " + flag + "=" + dir)
			if err := os.Setenv("XLA_FLAGS", flags); err != nil {
				warnings = append(warnings, fmt.Sprintf("set XLA_FLAGS: %v", err))
				break
			}
			env = append(env, "XLA_FLAGS="+flags)
			break
		}
	}
	return loaded, env, warnings
}
