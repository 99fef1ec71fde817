package hostproduct

import "github.com/gomlx/compute"

// FusedScaledDotProductAttention implements compute.FusedOps: its options hold values, mapped
// like the arguments.
func (f *function) FusedScaledDotProductAttention(query, key, value compute.Value, axesLayout compute.AttentionAxesLayout, options *compute.ScaledDotProductAttentionConfig) (compute.Value, []compute.Value, error) {
	in, err := f.inner()
	if err != nil {
		return nil, nil, err
	}
	args, err := f.useAll([]compute.Value{query, key, value})
	if err != nil {
		return nil, nil, err
	}
	opts, err := f.useAttentionOptions(options)
	if err != nil {
		return nil, nil, err
	}
	out, states, err := in.FusedScaledDotProductAttention(args[0], args[1], args[2], axesLayout, opts)
	if err != nil {
		return nil, nil, err
	}
	return f.made(out), f.madeAll(states), nil
}

// FusedScaledDotProductAttentionVJP implements compute.FusedOps, its options mapped as above.
func (f *function) FusedScaledDotProductAttentionVJP(query, key, value compute.Value, axesLayout compute.AttentionAxesLayout, options *compute.ScaledDotProductAttentionConfig, output compute.Value, statesForVJP []compute.Value, dOutput compute.Value) (compute.Value, compute.Value, compute.Value, error) {
	in, err := f.inner()
	if err != nil {
		return nil, nil, nil, err
	}
	args, err := f.useAll([]compute.Value{query, key, value, output, dOutput})
	if err != nil {
		return nil, nil, nil, err
	}
	states, err := f.useAll(statesForVJP)
	if err != nil {
		return nil, nil, nil, err
	}
	opts, err := f.useAttentionOptions(options)
	if err != nil {
		return nil, nil, nil, err
	}
	dq, dk, dv, err := in.FusedScaledDotProductAttentionVJP(args[0], args[1], args[2], axesLayout, opts, args[3], states, args[4])
	if err != nil {
		return nil, nil, nil, err
	}
	return f.made(dq), f.made(dk), f.made(dv), nil
}

// useAttentionOptions is a copy of options with its values mapped (nil stays nil).
func (f *function) useAttentionOptions(options *compute.ScaledDotProductAttentionConfig) (*compute.ScaledDotProductAttentionConfig, error) {
	if options == nil {
		return nil, nil
	}
	o := *options
	for _, v := range []*compute.Value{&o.QuerySeqLen, &o.KeyValueSeqLen, &o.Bias, &o.Mask} {
		if *v == nil {
			continue
		}
		var err error
		if *v, err = f.use(*v); err != nil {
			return nil, err
		}
	}
	return &o, nil
}
