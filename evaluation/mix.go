package evaluation

import (
	"fmt"
	"strconv"
	"strings"

	"rgcpred/rgc"
)

// MixSpec is the mixture (rgc.Mixture) of the models that arg lists:
//
//	[NAME=][W1*]SPEC1+[W2*]SPEC2+...
//
// Each SPEC is a model ParseSpec accepts with one repeat (ckpt:FILE,
// glm:FILE, zero, ...); a weight W defaults to 1 and the weights are
// normalised. NAME labels the model (default "mix"), e.g. for --compare.
// An ensemble of independently trained seeds is
// "ens=ckpt:s1.ckpt+ckpt:s2.ckpt+ckpt:s3.ckpt"; a network mixed with the
// GLM is "0.65*ckpt:net.ckpt+0.35*glm:glm.json". File names must not
// contain '+'.
func MixSpec(arg string, env SpecEnv) (ModelSpec, error) {
	name := "mix"
	if n, rest, ok := strings.Cut(arg, "="); ok && !strings.Contains(n, ":") {
		if n == "" {
			return ModelSpec{}, fmt.Errorf("mixture %q: empty name before '='", arg)
		}
		name, arg = n, rest
	}
	var members []ModelSpec
	var weights []float64
	var given []string
	for _, part := range strings.Split(arg, "+") {
		w := 1.0
		if ws, rest, ok := strings.Cut(part, "*"); ok {
			v, err := strconv.ParseFloat(ws, 64)
			if err != nil || !(v > 0) || v > 1e300 {
				return ModelSpec{}, fmt.Errorf("mixture %q: weight %q: want a positive number", arg, ws)
			}
			w, part = v, rest
		}
		if strings.HasPrefix(part, "mix:") {
			return ModelSpec{}, fmt.Errorf("mixture %q: a member cannot be a mixture", arg)
		}
		sp, err := ParseSpec(part, env)
		if err != nil {
			return ModelSpec{}, fmt.Errorf("mixture %s: %w", name, err)
		}
		if len(sp.Open) != 1 {
			return ModelSpec{}, fmt.Errorf("mixture %s: member %q has %d repeats; list each as its own member", name, part, len(sp.Open))
		}
		members = append(members, sp)
		weights = append(weights, w)
		given = append(given, part)
	}
	if len(members) < 2 {
		return ModelSpec{}, fmt.Errorf("mixture %q: want at least two members joined by '+'", arg)
	}
	open := func() (rgc.Predictor, func(), error) {
		var ps []rgc.Predictor
		var closers []func()
		closeAll := func() {
			for _, c := range closers {
				c()
			}
		}
		for _, sp := range members {
			p, c, err := sp.Open[0]()
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("mixture %s: %w", name, err)
			}
			ps = append(ps, p)
			closers = append(closers, c)
		}
		m, err := rgc.NewMixture(ps, weights)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("mixture %s: %w", name, err)
		}
		return m, closeAll, nil
	}
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	for i := range given {
		given[i] = strconv.FormatFloat(weights[i]/sum, 'g', 6, 64) + "*" + given[i]
	}
	return ModelSpec{Name: name, Kind: "mix", Members: given, Open: []func() (rgc.Predictor, func(), error){open}}, nil
}
