package parity

import "github.com/octlm/octlm/octlm"

// ProgressStep is how many positions a path runs between two Progress calls: the prefill's
// largest chunk (octlm runs a long prompt as chunks of powers of two up to 1024 rows, never
// growing), so that slices end where a one-call run's chunks end, on the same cache. The logits
// match one call's (TestProgressSameLogits compares them bit for bit).
const ProgressStep = 1024

// fullPathProgress is FullPath in slices of ProgressStep positions, calling report after each.
func fullPathProgress(m *octlm.Model, ids []int, report func(done, total int)) (octlm.Logits, error) {
	cache, err := m.NewCache(len(ids))
	if err != nil {
		return octlm.Logits{}, err
	}
	defer cache.Close()
	return slicedForward(m, ids, cache, 0, len(ids), report)
}

// cachedPathProgress is CachedPath with each half in slices of ProgressStep positions.
func cachedPathProgress(m *octlm.Model, ids []int, report func(done, total int)) (octlm.Logits, error) {
	split := Split(len(ids))
	cache, err := m.NewCache(split)
	if err != nil {
		return octlm.Logits{}, err
	}
	defer cache.Close()
	first, err := slicedForward(m, ids[:split], cache, 0, len(ids), report)
	if err != nil || split == len(ids) {
		return first, err
	}
	second, err := slicedForward(m, ids[split:], cache, split, len(ids), report)
	if err != nil {
		return octlm.Logits{}, err
	}
	return octlm.Logits{Rows: first.Rows + second.Rows, Vocab: first.Vocab, Data: append(first.Data, second.Data...)}, nil
}

// slicedForward runs ids on cache in slices of ProgressStep, reporting before+done of total
// positions after each slice.
func slicedForward(m *octlm.Model, ids []int, cache *octlm.Cache, before, total int, report func(done, total int)) (octlm.Logits, error) {
	var out octlm.Logits
	for at := 0; at < len(ids); at += ProgressStep {
		l, err := m.ForwardCached(ids[at:min(at+ProgressStep, len(ids))], cache)
		if err != nil {
			return octlm.Logits{}, err
		}
		out.Rows += l.Rows
		out.Vocab = l.Vocab
		out.Data = append(out.Data, l.Data...)
		report(before+at+l.Rows, total)
	}
	return out, nil
}
