// lllogits: every position's logits from llama.cpp for one token case, for octlm's parity table.
//
//   lllogits MODE MODEL.gguf THREADS TOKENS.i32 OUT.f32
//
// MODE: "batch" evaluates the whole case in one llama_decode (llama.cpp's chunked prompt path);
// "step" feeds it one token at a time (its recurrent/cached path), after the first LLB_PREFIX
// tokens (default 0) in one batch. TOKENS.i32 holds the token
// IDs as little-endian int32; OUT.f32 gets T x n_vocab float32 logits, row by row.
// Built against the llama.cpp headers and prebuilt CPU libraries of npm's node-llama-cpp
// (see run.sh). LLB_BINS names the folder of the ggml backend libraries. With LLB_DUMP=DIR it
// also writes every contiguous float32 graph tensor whose name starts with one of the
// comma-separated prefixes of LLB_DUMP_NAMES (default "l_out-": the residual stream after each
// layer) to DIR/NAME.f32, its ggml shape on stderr, for a layer-by-layer comparison.
// With LLB_LORA=ADAPTER.gguf it loads that LoRA adapter (llama_adapter_lora_init) and applies it
// to the context (llama_set_adapters_lora) at scale LLB_LORA_SCALE (default 1): llama.cpp then
// adds scale * (alpha / r) * B·A·x to each adapted matmul, alpha from the adapter's
// adapter.lora.alpha, r = rank of its lora_b (adapter.sh).
#include "llcommon.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *dump_dir, *dump_names = "l_out-";

static int wanted(const char *name) {
    const char *p = dump_names;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && !strncmp(name, p, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static bool dump(struct ggml_tensor *t, bool ask, void *ud) {
    (void)ud;
    if (!wanted(t->name) || t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) return !ask;
    if (ask) return true;
    size_t n = ggml_nbytes(t);
    float *buf = malloc(n);
    ggml_backend_tensor_get(t, buf, 0, n);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f32", dump_dir, t->name);
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(buf, 1, n, f); fclose(f); }
    fprintf(stderr, "dump %s ne=[%lld,%lld,%lld,%lld]\n", t->name, (long long)t->ne[0], (long long)t->ne[1],
            (long long)t->ne[2], (long long)t->ne[3]);
    free(buf);
    return true;
}

static int decode(struct llama_context *ctx, const llama_token *toks, int n, int pos0) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 6 || (strcmp(argv[1], "batch") && strcmp(argv[1], "step"))) {
        fprintf(stderr, "usage: lllogits batch|step MODEL.gguf THREADS TOKENS.i32 OUT.f32\n");
        return 2;
    }
    int step = !strcmp(argv[1], "step"), nth = atoi(argv[3]);
    FILE *f = fopen(argv[4], "rb");
    if (!f) { perror(argv[4]); return 2; }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    int n = (int)(bytes / 4);
    if (n < 1 || bytes % 4) { fprintf(stderr, "%s: want a non-empty list of int32 token IDs\n", argv[4]); return 2; }
    llama_token *toks = malloc(sizeof(llama_token) * n);
    if (fread(toks, 4, n, f) != (size_t)n) { fprintf(stderr, "%s: short read\n", argv[4]); return 2; }
    fclose(f);

    struct llama_model *model = load_cpu_model(argv[2]);
    if (!model) return 1;
    int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= V) { fprintf(stderr, "token %d at %d outside [0, %d)\n", toks[i], i, V); return 2; }

    struct llama_context_params cp = llama_context_default_params();
    int nc = ((n + 255) / 256) * 256;
    cp.n_ctx = nc;
    cp.n_batch = nc;
    cp.n_ubatch = nc;
    cp.n_seq_max = 1;
    cp.n_threads = nth;
    cp.n_threads_batch = nth;
    cp.type_k = GGML_TYPE_F32; // the KV cache in float32, like the weights
    cp.type_v = GGML_TYPE_F32;
    const char *fa = getenv("LLB_FA"); // flash attention: -1 auto, 0 off (default here), 1 on
    cp.flash_attn_type = (enum llama_flash_attn_type)(fa ? atoi(fa) : 0);
    dump_dir = getenv("LLB_DUMP");
    if (getenv("LLB_DUMP_NAMES")) dump_names = getenv("LLB_DUMP_NAMES");
    if (dump_dir) { cp.cb_eval = dump; cp.cb_eval_user_data = NULL; }
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "context init failed\n"); return 1; }
    const char *lora_path = getenv("LLB_LORA");
    struct llama_adapter_lora *lora = NULL;
    if (lora_path && *lora_path) {
        lora = llama_adapter_lora_init(model, lora_path);
        if (!lora) { fprintf(stderr, "%s: llama.cpp could not load it as a LoRA adapter\n", lora_path); return 1; }
        char *end, alpha[64] = "";
        const char *sc = getenv("LLB_LORA_SCALE");
        float scale = sc ? strtof(sc, &end) : 1.0f;
        if (sc && (end == sc || *end)) { fprintf(stderr, "LLB_LORA_SCALE=%s: not a number\n", sc); return 2; }
        if (llama_set_adapters_lora(ctx, &lora, 1, &scale)) { fprintf(stderr, "%s: llama_set_adapters_lora failed\n", lora_path); return 1; }
        llama_adapter_meta_val_str(lora, "adapter.lora.alpha", alpha, sizeof alpha);
        fprintf(stderr, "%s: LoRA adapter at scale %g, adapter.lora.alpha %s\n", lora_path, scale, *alpha ? alpha : "(absent)");
    }

    float *out = malloc(sizeof(float) * (size_t)n * V);
    if (step) {
        int prefix = getenv("LLB_PREFIX") ? atoi(getenv("LLB_PREFIX")) : 0;
        if (prefix < 0 || prefix >= n) prefix = 0;
        if (prefix > 0) {
            if (decode(ctx, toks, prefix, 0)) { fprintf(stderr, "llama_decode failed on the prefix\n"); return 1; }
            for (int i = 0; i < prefix; i++) memcpy(out + (size_t)i * V, llama_get_logits_ith(ctx, i), sizeof(float) * V);
        }
        for (int i = prefix; i < n; i++) {
            if (decode(ctx, toks + i, 1, i)) { fprintf(stderr, "llama_decode failed at %d\n", i); return 1; }
            memcpy(out + (size_t)i * V, llama_get_logits_ith(ctx, 0), sizeof(float) * V);
        }
    } else {
        if (decode(ctx, toks, n, 0)) { fprintf(stderr, "llama_decode failed\n"); return 1; }
        for (int i = 0; i < n; i++) memcpy(out + (size_t)i * V, llama_get_logits_ith(ctx, i), sizeof(float) * V);
    }
    f = fopen(argv[5], "wb");
    if (!f || fwrite(out, sizeof(float), (size_t)n * V, f) != (size_t)n * V || fclose(f)) { perror(argv[5]); return 1; }
    fprintf(stderr, "%s: %d x %d logits (%s)\n", argv[5], n, V, argv[1]);
    llama_free(ctx);
    if (lora) llama_adapter_lora_free(lora);
    llama_model_free(model);
    return 0;
}
