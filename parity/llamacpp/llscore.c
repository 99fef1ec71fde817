// llscore: llama.cpp scoring lm-eval loglikelihood requests, for octlm eval's batch benchmark.
//
//   llscore MODEL.gguf THREADS REQUESTS.jsonl NSEQ[,NSEQ...] [OUT.tsv]
//
// REQUESTS.jsonl is what BenchmarkLoglikelihoodBatch writes under $OCTLM_EVAL_BENCH_DIR: one
// request a line with "context_ids", "continuation_ids" (token IDs as lm-eval's HF backend encodes
// them) and "max_length". Each request is scored as HFLM scores it: the tokens run are
// (context + continuation)[-(max_length+1):][:-1], the last len(continuation) rows give the
// log-probabilities (log-softmax in double of llama.cpp's float32 logits), is_greedy = every
// continuation token its row's first argmax. Requests run longest first (HFLM's and octlm's
// order), NSEQ at a time: one llama_batch of NSEQ sequences (seq_id 0..NSEQ-1, each from position
// 0, logits flagged only on the continuation's rows) in one llama_decode (which splits it into
// ubatches of LLS_UBATCH tokens, default 512, llama.cpp's default), the memory cleared between
// batches. For every NSEQ it prints one line to stdout:
//
//   RESULT nseq=N requests=R tokens=T seconds=S requests_per_s=X tokens_per_s=Y
//
// tokens = context + continuation tokens (as the benchmark counts them); seconds covers the
// decodes and the log-softmax, not the model load. With OUT.tsv, the first NSEQ's results go
// there, one request a line in file order: index, log-likelihood (%.9g), is_greedy.
// The model's memory: one KV stream per sequence (kv_unified false, as llama.cpp advises for
// sequences without a shared prefix; LLS_UNIFIED=1 for one shared stream), float32 K and V
// (LLS_KV=f16 for llama.cpp's default f16), flash attention off (LLB_FA=1 or -1 to change).
// Built against the llama.cpp headers and prebuilt CPU libraries of npm's node-llama-cpp 3.22.1
// by setup.sh; LLB_BINS names the folder of the ggml backend libraries.
#include "llcommon.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}


typedef struct {
    int index, n_ctx, n_cont, max_length;
    int *ctx, *cont;
    int n_run, *run;        // the tokens run: (ctx + cont)[-(max_length+1):][:-1]
    double ll;
    int greedy;
} request;

// ints reads the JSON array of integers after "key": in line into *out; returns its length or -1.
static int ints(const char *line, const char *key, int **out, const char *path, int lineno) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) { fprintf(stderr, "%s:%d: no \"%s\"\n", path, lineno, key); return -1; }
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != '[') { fprintf(stderr, "%s:%d: \"%s\" is not a list\n", path, lineno, key); return -1; }
    p++;
    int n = 0, cap = 64;
    int *v = malloc(sizeof(int) * cap);
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ']') break;
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) { fprintf(stderr, "%s:%d: \"%s\": not an integer at %.10s\n", path, lineno, key, p); free(v); return -1; }
        if (n == cap) v = realloc(v, sizeof(int) * (cap *= 2));
        v[n++] = (int)x;
        p = end;
    }
    *out = v;
    return n;
}

static int cmp_longest(const void *a, const void *b) {
    const request *x = *(request *const *)a, *y = *(request *const *)b;
    if (x->n_run != y->n_run) return y->n_run - x->n_run;
    return x->index - y->index;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: llscore MODEL.gguf THREADS REQUESTS.jsonl NSEQ[,NSEQ...] [OUT.tsv]\n");
        return 2;
    }
    int nth = atoi(argv[2]);
    const char *path = argv[3];
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); return 2; }
    int n = 0, cap = 64;
    request *reqs = malloc(sizeof(request) * cap);
    size_t lcap = 0;
    char *line = NULL;
    for (int lineno = 1; getline(&line, &lcap, f) > 0; lineno++) {
        if (line[0] == '\n') continue;
        if (n == cap) reqs = realloc(reqs, sizeof(request) * (cap *= 2));
        request *q = &reqs[n];
        memset(q, 0, sizeof *q);
        q->index = n;
        if ((q->n_ctx = ints(line, "context_ids", &q->ctx, path, lineno)) < 0) return 2;
        if ((q->n_cont = ints(line, "continuation_ids", &q->cont, path, lineno)) < 0) return 2;
        const char *m = strstr(line, "\"max_length\":");
        if (!m || (q->max_length = atoi(m + strlen("\"max_length\":"))) < 1) {
            fprintf(stderr, "%s:%d: no positive \"max_length\"\n", path, lineno);
            return 2;
        }
        if (q->n_cont < 1 || q->n_cont > q->max_length) {
            fprintf(stderr, "%s:%d: %d continuation tokens: want 1 to max_length %d\n", path, lineno, q->n_cont, q->max_length);
            return 2;
        }
        int whole = q->n_ctx + q->n_cont, from = whole - (q->max_length + 1);
        if (from < 0) from = 0;
        q->n_run = whole - 1 - from;
        q->run = malloc(sizeof(int) * q->n_run);
        for (int i = 0; i < q->n_run; i++) {
            int k = from + i;
            q->run[i] = k < q->n_ctx ? q->ctx[k] : q->cont[k - q->n_ctx];
        }
        n++;
    }
    fclose(f);
    if (n == 0) { fprintf(stderr, "%s: no requests\n", path); return 2; }

    struct llama_model *model = load_cpu_model(argv[1]);
    if (!model) return 1;
    int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int r = 0; r < n; r++)
        for (int i = 0; i < reqs[r].n_ctx + reqs[r].n_cont; i++) {
            int t = i < reqs[r].n_ctx ? reqs[r].ctx[i] : reqs[r].cont[i - reqs[r].n_ctx];
            if (t < 0 || t >= V) { fprintf(stderr, "%s:%d: token %d outside [0, %d)\n", path, r + 1, t, V); return 2; }
        }
    request **order = malloc(sizeof(request *) * n);
    for (int r = 0; r < n; r++) order[r] = &reqs[r];
    qsort(order, n, sizeof *order, cmp_longest);
    int longest = order[0]->n_run;
    long tokens = 0;
    for (int r = 0; r < n; r++) tokens += reqs[r].n_ctx + reqs[r].n_cont;

    int unified = getenv("LLS_UNIFIED") && atoi(getenv("LLS_UNIFIED"));
    int ubatch = getenv("LLS_UBATCH") ? atoi(getenv("LLS_UBATCH")) : 512;
    const char *kv = getenv("LLS_KV");
    const char *fa = getenv("LLB_FA");
    int first = 1;
    for (char *s = argv[4]; *s;) {
        char *end;
        int nseq = (int)strtol(s, &end, 10);
        if (end == s || nseq < 1 || nseq > 256) { fprintf(stderr, "NSEQ %s: want 1 to 256, comma-separated\n", argv[4]); return 2; }
        s = *end == ',' ? end + 1 : end;
        int per = ((longest + 255) / 256) * 256, total = 0;
        for (int r = 0; r < n && r < nseq; r++) total += order[r]->n_run; // the longest batch
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t)(unified ? ((total + 255) / 256) * 256 : per * nseq);
        cp.n_batch = (uint32_t)total;
        cp.n_ubatch = (uint32_t)(ubatch < total ? ubatch : total);
        cp.n_seq_max = (uint32_t)nseq;
        cp.kv_unified = unified;
        cp.n_threads = nth;
        cp.n_threads_batch = nth;
        if (!kv || strcmp(kv, "f16")) { cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32; }
        cp.flash_attn_type = (enum llama_flash_attn_type)(fa ? atoi(fa) : 0);
        struct llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) { fprintf(stderr, "nseq %d: context init failed\n", nseq); return 1; }
        llama_memory_t mem = llama_get_memory(ctx);
        struct llama_batch b = llama_batch_init(total, 0, 1);
        double t0 = now();
        for (int g = 0; g < n; g += nseq) {
            int k = n - g < nseq ? n - g : nseq;
            b.n_tokens = 0;
            for (int j = 0; j < k; j++) {
                request *q = order[g + j];
                for (int i = 0; i < q->n_run; i++) {
                    int at = b.n_tokens++;
                    b.token[at] = q->run[i];
                    b.pos[at] = i;
                    b.n_seq_id[at] = 1;
                    b.seq_id[at][0] = j;
                    b.logits[at] = i >= q->n_run - q->n_cont;
                }
            }
            llama_memory_clear(mem, true);
            int rc = llama_decode(ctx, b);
            if (rc) { fprintf(stderr, "llama_decode failed (%d) on the batch from request %d\n", rc, g); return 1; }
            int at = 0;
            for (int j = 0; j < k; j++) {
                request *q = order[g + j];
                double ll = 0;
                int greedy = 1;
                for (int i = 0; i < q->n_run; i++, at++) {
                    if (i < q->n_run - q->n_cont) continue;
                    const float *row = llama_get_logits_ith(ctx, at);
                    int want = q->cont[i - (q->n_run - q->n_cont)], arg = 0;
                    double mx = row[0];
                    for (int v = 1; v < V; v++)
                        if (row[v] > mx) { mx = row[v]; arg = v; }
                    double sum = 0;
                    for (int v = 0; v < V; v++) sum += exp((double)row[v] - mx);
                    ll += (double)row[want] - mx - log(sum);
                    if (arg != want) greedy = 0;
                }
                q->ll = ll;
                q->greedy = greedy;
            }
        }
        double secs = now() - t0;
        printf("RESULT nseq=%d requests=%d tokens=%ld seconds=%.3f requests_per_s=%.4f tokens_per_s=%.2f\n", nseq, n,
               tokens, secs, n / secs, tokens / secs);
        fflush(stdout);
        if (first && argc == 6) {
            FILE *o = fopen(argv[5], "w");
            if (!o) { perror(argv[5]); return 1; }
            for (int r = 0; r < n; r++) fprintf(o, "%d\t%.9g\t%d\n", r, reqs[r].ll, reqs[r].greedy);
            if (fclose(o)) { perror(argv[5]); return 1; }
        }
        first = 0;
        llama_batch_free(b);
        llama_free(ctx);
    }
    llama_model_free(model);
    return 0;
}
