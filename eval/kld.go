package eval

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/octlm/octlm/octlm"
)

// The KL-divergence base file is llama-perplexity's (--kl-divergence-base): "_logits_", then
// int32 n_ctx, n_vocab, n_chunk, the n_chunk·n_ctx int32 tokens, then for each chunk and each
// scored position (n_ctx/2 … n_ctx-2, predicting the next token) one record of
// 2·⌈n_vocab/2⌉ + 4 uint16: float32 scale and float32 min_log_prob, then each logit above
// min_logit (max_logit - 16 at most below the top) as round((logit - min_logit)/scale), the rest
// 0. Little-endian, as llama.cpp writes it on the machines it runs on.

const kldMagic = "_logits_"

// kldRecord is the number of uint16 in one position's record.
func kldRecord(vocab int) int { return 2*((vocab+1)/2) + 4 }

// Forwarder is what the KL-divergence run needs of a model: every position's logits.
type Forwarder interface {
	Forward(ids []int) (octlm.Logits, error)
}

// KLBaseOptions say how to cut the text's tokens into chunks.
type KLBaseOptions struct {
	Ctx    int // n_ctx: tokens per chunk (each chunk runs alone; its second half is scored)
	Chunks int // at most this many chunks (0: all whole chunks)
}

// WriteKLBase runs the model on each chunk of tokens and writes llama-perplexity's base file to
// w. It returns the perplexity over the scored positions.
func WriteKLBase(w io.Writer, m Forwarder, tokens []int, vocab int, opts KLBaseOptions) (float64, error) {
	n := opts.Ctx
	if n < 4 {
		return 0, fmt.Errorf("kl-divergence: a context of %d tokens: must be at least 4", n)
	}
	chunks := len(tokens) / n
	if opts.Chunks > 0 {
		chunks = min(chunks, opts.Chunks)
	}
	if len(tokens) < 2*n || chunks < 1 {
		return 0, fmt.Errorf("kl-divergence: %d tokens: at least %d (two chunks of %d) are needed, as llama-perplexity requires", len(tokens), 2*n, n)
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(kldMagic)
	header := []int32{int32(n), int32(vocab), int32(chunks)}
	binary.Write(bw, binary.LittleEndian, header)
	toks := make([]int32, chunks*n)
	for i := range toks {
		toks[i] = int32(tokens[i])
	}
	binary.Write(bw, binary.LittleEndian, toks)
	first := n / 2
	rec := make([]uint16, kldRecord(vocab))
	nll, count := 0.0, 0
	for c := range chunks {
		ids := tokens[c*n : (c+1)*n]
		l, err := m.Forward(ids)
		if err != nil {
			return 0, fmt.Errorf("kl-divergence: chunk %d: %w", c, err)
		}
		if l.Vocab < vocab {
			return 0, fmt.Errorf("kl-divergence: the model gives %d logits a position, fewer than the vocabulary's %d", l.Vocab, vocab)
		}
		for j := first; j < n-1; j++ {
			nll += quantizeLogProbs(l.Row(j)[:vocab], rec, ids[j+1])
			count++
			if err := binary.Write(bw, binary.LittleEndian, rec); err != nil {
				return 0, err
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return math.Exp(nll / float64(count)), nil
}

// nearestInt is llama.cpp's nearest_int: round half to even through float32 addition.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// quantizeLogProbs is llama-perplexity's log_softmax writing a record; it returns the
// position's negative log-likelihood of tok.
func quantizeLogProbs(logits []float32, rec []uint16, tok int) float64 {
	maxL, minL := logits[0], logits[0]
	for _, v := range logits[1:] {
		maxL = max(maxL, v)
		minL = min(minL, v)
	}
	minL = max(minL, maxL-16)
	sum := 0.0
	for _, v := range logits {
		sum += float64(float32(math.Exp(float64(v - maxL))))
	}
	logSum := float32(math.Log(sum))
	minLogProb := minL - maxL - logSum
	scale := (maxL - minL) / 65535
	putFloat(rec[0:2], scale)
	putFloat(rec[2:4], minLogProb)
	out := rec[4:]
	clear(out)
	if scale != 0 {
		inv := 1 / scale
		for i, v := range logits {
			if v > minL {
				out[i] = uint16(nearestInt(inv * (v - minL)))
			}
		}
	}
	return float64(maxL) + float64(logSum) - float64(logits[tok])
}

// putFloat stores f in two uint16 as its bytes lie in memory on a little-endian machine (the
// record's float32 header).
func putFloat(u []uint16, f float32) {
	b := math.Float32bits(f)
	u[0], u[1] = uint16(b), uint16(b>>16)
}

// KLResult is what llama-perplexity prints for --kl-divergence.
type KLResult struct {
	Positions                  int
	MeanPPL, MeanPPLBase       float64
	MeanKLD, KLDStderr, MaxKLD float64
	MedianKLD, KLD99           float64
	SameTop                    float64 // fraction of positions whose top token agrees
	RMSDeltaP, MaxDeltaP       float64
}

// ReadKLHeader reads a base file's magic and header: the chunk length, the vocabulary and the
// number of chunks.
func ReadKLHeader(r io.Reader) (ctx, vocab, chunks int, err error) {
	magic := make([]byte, 8)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != kldMagic {
		return 0, 0, 0, errors.New("not a llama-perplexity KL-divergence base file (no _logits_ magic)")
	}
	var header [3]int32
	if err := binary.Read(r, binary.LittleEndian, &header); err != nil {
		return 0, 0, 0, fmt.Errorf("reading the header: %w", err)
	}
	ctx, vocab, chunks = int(header[0]), int(header[1]), int(header[2])
	if ctx < 4 || ctx > 1<<20 || vocab < 1 || vocab > 1<<24 || chunks < 1 || chunks > 1<<20 {
		return 0, 0, 0, fmt.Errorf("header n_ctx %d, n_vocab %d, n_chunk %d: not usable", ctx, vocab, chunks)
	}
	return ctx, vocab, chunks, nil
}

// KLDivergence reads a base file from r, runs the model on its chunks and compares, position by
// position, the model's distribution with the base's, as llama-perplexity --kl-divergence does.
func KLDivergence(r io.Reader, m Forwarder, vocabLimit int) (KLResult, error) {
	br := bufio.NewReader(r)
	n, vocab, chunks, err := ReadKLHeader(br)
	if err != nil {
		return KLResult{}, err
	}
	if vocab > vocabLimit {
		return KLResult{}, fmt.Errorf("header n_vocab %d: not usable with this model (vocabulary %d)", vocab, vocabLimit)
	}
	toks := make([]int32, n*chunks)
	if err := binary.Read(br, binary.LittleEndian, toks); err != nil {
		return KLResult{}, fmt.Errorf("reading %d tokens: %w", len(toks), err)
	}
	for i, t := range toks {
		if t < 0 || int(t) >= vocab {
			return KLResult{}, fmt.Errorf("token %d (position %d) is outside the vocabulary of %d", t, i, vocab)
		}
	}
	first := n / 2
	rec := make([]uint16, kldRecord(vocab))
	var res KLResult
	var klds []float64
	sumKLD, sumKLD2, nll, nllBase, sumDP2 := 0.0, 0.0, 0.0, 0.0, 0.0
	same := 0
	for c := range chunks {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = int(toks[c*n+i])
		}
		l, err := m.Forward(ids)
		if err != nil {
			return KLResult{}, fmt.Errorf("chunk %d: %w", c, err)
		}
		for j := first; j < n-1; j++ {
			if err := binary.Read(br, binary.LittleEndian, rec); err != nil {
				return KLResult{}, fmt.Errorf("chunk %d, position %d: the file ends early: %w", c, j, err)
			}
			kld, pNLL, bNLL, top := klPosition(l.Row(j)[:vocab], rec, ids[j+1])
			klds = append(klds, kld)
			sumKLD += kld
			sumKLD2 += kld * kld
			nll += pNLL
			nllBase += bNLL
			dp := math.Exp(-pNLL) - math.Exp(-bNLL)
			sumDP2 += dp * dp
			res.MaxDeltaP = max(res.MaxDeltaP, math.Abs(dp))
			if top {
				same++
			}
		}
	}
	k := float64(len(klds))
	res.Positions = len(klds)
	res.MeanPPL, res.MeanPPLBase = math.Exp(nll/k), math.Exp(nllBase/k)
	res.MeanKLD = sumKLD / k
	if k > 1 {
		res.KLDStderr = math.Sqrt(math.Max(0, sumKLD2/k-res.MeanKLD*res.MeanKLD) / (k - 1))
	}
	sort.Float64s(klds)
	res.MaxKLD = klds[len(klds)-1]
	res.MedianKLD = klds[len(klds)/2]
	res.KLD99 = klds[min(len(klds)-1, int(0.99*k))]
	res.SameTop = float64(same) / k
	res.RMSDeltaP = math.Sqrt(sumDP2 / k)
	return res, nil
}

// klPosition is llama-perplexity's log_softmax against a base record: KL(base ‖ model) over
// the base's log-probabilities above -16, the two negative log-likelihoods of tok, and whether
// the top tokens agree.
func klPosition(logits []float32, rec []uint16, tok int) (kld, nll, nllBase float64, sameTop bool) {
	maxL := logits[0]
	imax := 0
	for i, v := range logits {
		if v > maxL {
			maxL, imax = v, i
		}
	}
	sum := 0.0
	for _, v := range logits {
		sum += float64(float32(math.Exp(float64(v - maxL))))
	}
	logSum := float32(math.Log(sum))
	scale := math.Float32frombits(uint32(rec[0]) | uint32(rec[1])<<16)
	minLogProb := math.Float32frombits(uint32(rec[2]) | uint32(rec[3])<<16)
	base := rec[4:]
	nll = float64(maxL + logSum - logits[tok])
	nllBase = float64(-(scale*float32(base[tok]) + minLogProb))
	top := maxL + logSum
	imaxBase := -1
	var pMax float32
	for i := range logits {
		lp := scale*float32(base[i]) + minLogProb
		if i == 0 || lp > pMax {
			pMax, imaxBase = lp, i
		}
		if lp > -16 {
			kld += float64(float32(math.Exp(float64(lp)))) * float64(lp-logits[i]+top)
		}
	}
	return kld, nll, nllBase, imax == imaxBase
}
