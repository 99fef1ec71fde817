// llcommon.h: what lllogits.c and llscore.c share: llama.cpp's log kept to warnings, and the
// model loaded on the CPU backends (LLB_BINS: the folder of node-llama-cpp's prebuilt libraries).
#ifndef LLCOMMON_H
#define LLCOMMON_H
#include "ggml.h"
#include "ggml-backend.h"
#include "llama.h"
#include <stdio.h>
#include <stdlib.h>

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_WARN || getenv("LLB_VERBOSE")) fputs(text, stderr);
}

// load_cpu_model loads the GGUF at path with no GPU layers, or says why not and returns NULL.
static struct llama_model *load_cpu_model(const char *path) {
    llama_log_set(quiet, NULL);
    const char *bins = getenv("LLB_BINS");
    if (bins) ggml_backend_load_all_from_path(bins); else ggml_backend_load_all();
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) fprintf(stderr, "%s: llama.cpp could not load it\n", path);
    return model;
}
#endif
