#!/usr/bin/env python3
"""Reference answers for octlm's evaluation harness: lm-evaluation-harness's requests, built and
scored independently of octlm's Go code, with a float64 eager Qwen3 forward.

For each task YAML (the subset `octlm eval` reads: dataset_path json with local data_files,
doc_to_text / doc_to_target / doc_to_choice as a feature, a list or a Jinja template rendered by
Jinja2 with StrictUndefined and keep_trailing_newline, description, target_delimiter,
fewshot_delimiter, num_fewshot with the first_n sampler, output types multiple_choice (also with
several contexts: multiple_input, Winogrande's form), loglikelihood, loglikelihood_rolling and
generate_until, metrics acc, acc_norm, acc_bytes, acc_mutual_info, exact_match, perplexity, word_perplexity, byte_perplexity, bits_per_byte, filters regex and
take_first) it builds the requests as lm-eval's ConfigurableTask does, encodes them as lm-eval's
HFLM does (_encode_pair, the prefix token for an empty context, left truncation to max_length + 1,
rolling windows), scores them with parity/reference_qwen35.py's eager forward in float64
(imported, not copied), and prints one JSON object a task: every request's context,
continuation, token IDs, summed log-likelihood, is_greedy or generated text, and the metrics
under lm-eval's keys.

Tokenization: Debian has no Hugging Face tokenizers package, so texts are encoded by a command
given with --tokenizer-cmd that reads one JSON string a line and writes its token IDs as a JSON
array a line (octlm's `octlm tokenize --model DIR`, whose tokenizer is checked against the
reference tokenizer in octlm/tokenizer). Everything else is computed here.

Needs /usr/bin/python3 with Debian's python3-torch, python3-numpy, python3-yaml, python3-jinja2:

    /usr/bin/python3 parity/reference_eval.py --model DIR --max-length 32 \\
        --tokenizer-cmd "octlm tokenize --model DIR" TASK.yaml [TASK.yaml ...]
"""

import argparse
import ast
import json
import math
import os
import re
import shlex
import string
import subprocess
import sys
from pathlib import Path

import jinja2
import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_qwen35 import Model, forward  # noqa: E402  (the eager forward, beside this script)

ENV = jinja2.Environment(loader=jinja2.BaseLoader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render(template, doc):
    return ENV.from_string(template).render(**doc)


class Tokenizer:
    """Encodes through a subprocess speaking octlm tokenize's protocol; decodes IDs likewise."""

    def __init__(self, cmd):
        self.enc = subprocess.Popen(shlex.split(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.dec = subprocess.Popen(shlex.split(cmd) + ["--decode"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.cache = {}

    def encode(self, text):
        if text not in self.cache:
            if text == "":
                self.cache[text] = []
            else:
                self.enc.stdin.write(json.dumps(text) + "\n")
                self.enc.stdin.flush()
                self.cache[text] = json.loads(self.enc.stdout.readline())
        return list(self.cache[text])

    def decode(self, ids):
        if not ids:
            return ""
        self.dec.stdin.write(json.dumps(ids) + "\n")
        self.dec.stdin.flush()
        return json.loads(self.dec.stdout.readline())


class Task:
    def __init__(self, path):
        self.path = Path(path)
        with open(path, encoding="utf-8") as f:
            self.cfg = yaml.safe_load(f)
        c = self.cfg
        self.name = c["task"]
        self.output_type = c.get("output_type", "generate_until")
        files = c["dataset_kwargs"]["data_files"]
        if not isinstance(files, dict):
            files = {"train": files}
        self.splits = {}
        for split, names in files.items():
            names = [names] if isinstance(names, str) else names
            docs = []
            for n in names:
                with open(self.path.parent / n, encoding="utf-8") as f:
                    text = f.read()
                if text.lstrip().startswith("["):
                    docs += json.loads(text)
                else:
                    docs += [json.loads(line) for line in text.splitlines() if line.strip()]
            self.splits[split] = docs
        self.test_split = c.get("test_split")
        self.eval_split = self.test_split or c.get("validation_split")
        self.fewshot_split = c.get("fewshot_split")
        self.docs = self.splits[self.eval_split]
        self.features = list(self.docs[0].keys())
        self.target_delimiter = c.get("target_delimiter", " ")
        self.fewshot_delimiter = c.get("fewshot_delimiter", "\n\n")
        self.num_fewshot = c.get("num_fewshot") or 0
        self.has_choices = c.get("doc_to_choice") is not None
        defaults = {"multiple_choice": ["acc", "acc_norm"], "loglikelihood": ["perplexity", "acc"],
                    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
                    "generate_until": ["exact_match"]}
        self.metrics = c.get("metric_list") or [{"metric": m} for m in defaults[self.output_type]]
        self.gen = dict(c.get("generation_kwargs") or {})
        # ConfigurableTask.__init__: an integer doc_to_text on the first document, with choices,
        # makes the choices the contexts (multiple_input)
        self.multiple_input = self.has_choices and isinstance(self.doc_to_text(self.docs[0]), int)

    # lm-eval's ConfigurableTask.doc_to_text / doc_to_target / doc_to_choice
    def doc_to_text(self, doc):
        f = self.cfg["doc_to_text"]
        if isinstance(f, int):
            return f
        if f in self.features:
            return doc[f]
        s = render(f, doc)
        return ast.literal_eval(s) if s.isdigit() and self.has_choices else s

    def doc_to_target(self, doc):
        f = self.cfg["doc_to_target"]
        if isinstance(f, (int, list)):
            return f
        if f in self.features:
            return doc[f]
        s = render(f, doc)
        if s.isdigit() and self.has_choices:
            return ast.literal_eval(s)
        if len(s) >= 2 and s[0] == "[" and s[-1] == "]":
            try:
                return ast.literal_eval(s)
            except (SyntaxError, ValueError):
                return s
        return s

    def doc_to_choice(self, doc):
        f = self.cfg["doc_to_choice"]
        if isinstance(f, str):
            return doc[f] if f in self.features else ast.literal_eval(render(f, doc))
        if isinstance(f, dict):
            return list(f.values())
        return f

    def fewshot_docs(self):
        for s in (self.fewshot_split, self.cfg.get("training_split"), self.cfg.get("validation_split"), self.test_split):
            if s:
                return self.splits[s]

    def context(self, doc):
        """fewshot_context without a chat template; build_qa_turn for each first_n shot. Returns the
        description and shots, and the document's doc_to_text (its gold index with multiple_input)."""
        out = ""
        desc = self.cfg.get("description")
        if desc:
            out += doc[desc] if desc in doc else render(desc, doc)
        if self.num_fewshot > 0:
            pool = self.fewshot_docs()
            if self.fewshot_split == self.test_split:
                pool = [d for d in pool if d != doc]
            for fs in pool[: self.num_fewshot]:
                q, a = self.doc_to_text(fs), self.doc_to_target(fs)
                if self.multiple_input:  # q = c[q], c = None: the answer is the target itself
                    q = self.doc_to_choice(fs)[q]
                if a is None or a == "":
                    out += q
                    continue
                if self.has_choices and isinstance(a, int) and not self.multiple_input:
                    a = self.doc_to_choice(fs)[a]
                elif isinstance(a, list):
                    a = a[0]
                out += q + self.target_delimiter + a + self.fewshot_delimiter
        return out, self.doc_to_text(doc)


class LM:
    """lm-eval's HFLM rules over the float64 eager forward."""

    def __init__(self, folder, max_length, tok):
        self.model = Model(Path(folder))
        self.w = self.model.tensors(torch.float64)
        self.max_length = max_length
        self.tok = tok
        with open(Path(folder) / "tokenizer_config.json", encoding="utf-8") as f:
            tc = json.load(f)
        name = lambda v: v["content"] if isinstance(v, dict) else v  # noqa: E731
        self.eos_text = name(tc["eos_token"])
        self.eos = tok.encode(self.eos_text)[0]
        bos = tc.get("bos_token")
        self.prefix = tok.encode(name(bos))[0] if bos else self.eos

    def logprobs(self, ids):
        with torch.no_grad():
            logits = forward(self.model, self.w, ids, torch.float64)
        return torch.log_softmax(logits, dim=-1)

    def encode_pair(self, context, continuation):
        if context == "":
            cont = self.tok.encode(continuation)
            return ([self.prefix], cont) if self.prefix != cont[0] else (cont[:1], cont[1:])
        n = len(context) - len(context.rstrip())
        if n > 0:
            continuation = context[-n:] + continuation
            context = context[:-n]
        whole = self.tok.encode(context + continuation)
        ctx = self.tok.encode(context)
        return ctx, whole[len(ctx):]

    def score(self, ctx, cont):
        inp = (ctx + cont)[-(self.max_length + 1):][:-1]
        lp = self.logprobs(inp)[len(inp) - len(cont):]
        ll = float(sum(lp[i, t] for i, t in enumerate(cont)))
        greedy = bool(all(int(lp[i].argmax()) == t for i, t in enumerate(cont)))
        return ll, greedy

    def rolling(self, text):
        toks = self.tok.encode(text)
        total, L = 0.0, self.max_length
        # utils.get_rolling_token_windows (context_len 1) + make_disjoint_window
        first = min(L, len(toks))
        windows = [([self.prefix] + toks[: first - 1], toks[:first])]
        predicted = first
        while predicted < len(toks):
            n = min(len(toks) - predicted, L)
            end = predicted + n
            windows.append((toks[end - L - 1: end - 1], toks[end - n: end]))
            predicted += n
        for a, b in windows:
            total += self.score(a[: len(a) - (len(b) - 1)], b)[0]
        return total, len(toks)

    def generate(self, context, gen):
        max_gen = gen.get("max_gen_toks", 256)
        until = gen.get("until", [])
        until = [until] if isinstance(until, str) else list(until)
        if self.eos_text not in until:
            until.append(self.eos_text)
        ids = self.tok.encode(context)[-(self.max_length - max_gen):] or [self.prefix]
        out = []
        for _ in range(max_gen):
            nxt = int(self.logprobs(ids + out)[-1].argmax())
            out.append(nxt)
            if nxt == self.eos or any(u and u in self.tok.decode(out) for u in until):
                break
        text = self.tok.decode([i for i in out if i != self.eos and not self.tok.decode([i]).startswith("<|")])
        for u in until:
            if u:
                text = text.split(u)[0]
        return text


def exact_match(pred, ref, m):
    for r in m.get("regexes_to_ignore") or []:
        pred, ref = re.sub(r, "", pred), re.sub(r, "", ref)
    if m.get("ignore_case"):
        pred, ref = pred.lower(), ref.lower()
    if m.get("ignore_punctuation"):
        t = str.maketrans("", "", string.punctuation)
        pred, ref = pred.translate(t), ref.translate(t)
    return float(pred == ref)


def regex_filter(resp, f):
    pat = f.get("regex_pattern", r"#### (\-?[0-9\.\,]+)")
    match = re.compile(pat).findall(resp)
    if not match:
        return f.get("fallback", "[invalid]")
    match = match[f.get("group_select", 0)]
    if isinstance(match, tuple):
        match = [m for m in match if m]
        match = match[0] if match else f.get("fallback", "[invalid]")
    return match.strip()


def mean_stderr(xs):
    if len(xs) < 2:
        return "N/A"
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs))


def run_task(task, lm, limit):
    docs = task.docs[:limit] if limit else task.docs
    requests, per_doc = [], []
    filters = task.cfg.get("filter_list") or [{"name": "none", "filter": [{"function": "take_first"}]}]
    for doc_id, doc in enumerate(docs):
        prefix, question = task.context(doc)
        ctx = prefix + question if not task.multiple_input else None
        target = task.doc_to_target(doc)
        row = {"doc_id": doc_id}
        if task.output_type in ("multiple_choice", "loglikelihood"):
            mutual_info = any(m["metric"] == "acc_mutual_info" for m in task.metrics)
            if task.output_type == "multiple_choice":
                choices = task.doc_to_choice(doc)
                if task.multiple_input:  # construct_requests: the choices are the contexts
                    pairs = [(prefix + c, f"{task.target_delimiter}{target}") for c in choices]
                else:
                    pairs = [(ctx, task.target_delimiter + c) for c in choices]
                if mutual_info:  # the unconditional requests, after the choices'
                    pairs += [("", task.target_delimiter + c) for c in choices]
            else:
                pairs = [(ctx, target)]
            lls, greedy = [], []
            for c, k in pairs:
                ci, ki = lm.encode_pair(c, k)
                ll, g = lm.score(ci, ki)
                lls.append(ll)
                greedy.append(g)
                requests.append({"doc_id": doc_id, "context": c, "continuation": k, "context_ids": ci,
                                 "continuation_ids": ki, "loglikelihood": ll, "is_greedy": g})
            if task.output_type == "loglikelihood":
                row["perplexity"], row["acc"] = lls[0], float(greedy[0])
            else:
                if task.multiple_input:
                    gold = question
                else:
                    gold = target if not isinstance(target, str) else choices.index(target)
                gold = gold if isinstance(gold, list) else [gold]
                n = len(choices)
                lls_a, lls_u = np.array(lls[:n]), np.array(lls[n:])
                if mutual_info:
                    row["acc_mutual_info"] = float(int(np.argmax(lls_a - lls_u)) == gold[0])
                pred = int(np.argmax(lls_a))
                pred_norm = int(np.argmax(lls_a / np.array([float(len(c)) for c in choices])))
                pred_bytes = int(np.argmax(lls_a / np.array([float(len(c.encode("utf-8"))) for c in choices])))
                row["acc"], row["acc_norm"], row["acc_bytes"] = float(pred in gold), float(pred_norm in gold), float(pred_bytes in gold)
                row["exact_match"] = float(any(greedy[g] for g in gold))
        elif task.output_type == "loglikelihood_rolling":
            ll, ntok = lm.rolling(target)
            requests.append({"doc_id": doc_id, "loglikelihood": ll, "tokens": ntok})
            row["rolling"] = (ll, len(re.split(r"\s+", target)), len(target.encode("utf-8")))
        else:
            text = lm.generate(ctx, task.gen)
            requests.append({"doc_id": doc_id, "context": ctx, "generated": text})
            gold = task.doc_to_choice(doc)[target] if task.has_choices else target
            golds = [str(g) for g in gold] if isinstance(gold, list) else [str(gold)]
            for fl in filters:
                resp = text
                for step in fl["filter"]:
                    if step["function"] == "regex":
                        resp = regex_filter(resp, step)
                for m in task.metrics:
                    row[(m["metric"], fl["name"])] = max(exact_match(resp, g, m) for g in golds)
        per_doc.append(row)
    metrics = {}
    for m in task.metrics:
        name = m["metric"]
        if task.output_type == "loglikelihood_rolling":
            items = [r["rolling"] for r in per_doc]
            ll = sum(i[0] for i in items)
            if name == "word_perplexity":
                metrics["word_perplexity,none"] = math.exp(-ll / sum(i[1] for i in items))
            elif name == "byte_perplexity":
                metrics["byte_perplexity,none"] = math.exp(-ll / sum(i[2] for i in items))
            elif name == "bits_per_byte":
                metrics["bits_per_byte,none"] = -ll / sum(i[2] for i in items) / math.log(2)
        elif name == "perplexity":
            metrics["perplexity,none"] = math.exp(-sum(r["perplexity"] for r in per_doc) / len(per_doc))
        elif task.output_type == "generate_until":
            for fl in filters:
                xs = [r[(name, fl["name"])] for r in per_doc]
                metrics[f"{name},{fl['name']}"] = sum(xs) / len(xs)
                metrics[f"{name}_stderr,{fl['name']}"] = mean_stderr(xs)
        else:
            xs = [r[name] for r in per_doc]
            metrics[f"{name},none"] = sum(xs) / len(xs)
            metrics[f"{name}_stderr,none"] = mean_stderr(xs)
    return {"task": task.name, "requests": requests, "metrics": metrics}


def main():
    p = argparse.ArgumentParser(description="lm-eval requests scored by a float64 eager Qwen3, for octlm eval.")
    p.add_argument("--model", required=True, help="Qwen3 checkpoint folder")
    p.add_argument("--max-length", type=int, required=True, help="lm-eval's max_length")
    p.add_argument("--tokenizer-cmd", required=True, help="command reading JSON strings, writing token ID arrays (octlm tokenize --model DIR)")
    p.add_argument("--limit", type=int, default=0, help="first N documents of each task")
    p.add_argument("tasks", nargs="+", help="task YAML files")
    a = p.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tok = Tokenizer(a.tokenizer_cmd)
    lm = LM(a.model, a.max_length, tok)
    for t in a.tasks:
        print(json.dumps(run_task(Task(t), lm, a.limit), ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
