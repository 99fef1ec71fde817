"""cases.json, the token-ID cases a reference is computed for: read by reference.py and
reference_qwen35.py (standard library only, so that the Qwen3.5 reference keeps needing no
transformers)."""

import json
from pathlib import Path


def read_cases(path: Path) -> list:
    """Reads cases.json: a non-empty list of non-empty lists of non-negative integers."""
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)
    if not isinstance(cases, list) or not cases:
        raise SystemExit(f"{path}: want a non-empty JSON list of lists of token IDs")
    for n, ids in enumerate(cases):
        if not isinstance(ids, list) or not ids:
            raise SystemExit(f"{path}: case {n} must be a non-empty list of token IDs")
        for i, token in enumerate(ids):
            # bool is an int in Python; refuse it explicitly.
            if not isinstance(token, int) or isinstance(token, bool) or token < 0:
                raise SystemExit(f"{path}: case {n}, position {i}: {token!r} is not a token ID")
    return cases
