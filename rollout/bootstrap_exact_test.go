package rollout

import (
	"math"
	"slices"
	"testing"
)

// exactBootstrap is the bootstrap distribution of the IQM of x computed
// exactly, with no random numbers: every multiset of len(x) draws with
// replacement (the cells' counts k_i, summing to n) with its multinomial
// probability n! / prod(k_i!) / n^n. It returns the distinct IQMs
// ascending and their probabilities.
func exactBootstrap(x []float64) (vals, probs []float64) {
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	logFact := make([]float64, n+1)
	for i := 1; i <= n; i++ {
		logFact[i] = logFact[i-1] + math.Log(float64(i))
	}
	dist := map[float64]float64{}
	counts := make([]int, n)
	sample := make([]float64, 0, n)
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == n-1 {
			counts[i] = left
			sample = sample[:0]
			lp := logFact[n] - float64(n)*math.Log(float64(n))
			for j, k := range counts {
				lp -= logFact[k]
				for range k {
					sample = append(sample, s[j])
				}
			}
			// The trimmed mean of the sorted draws, summed in order.
			cut := n / 4
			var sum float64
			for _, v := range sample[cut : n-cut] {
				sum += v
			}
			dist[sum/float64(n-2*cut)] += math.Exp(lp)
			return
		}
		for k := 0; k <= left; k++ {
			counts[i] = k
			rec(i+1, left-k)
		}
	}
	rec(0, n)
	for v := range dist {
		vals = append(vals, v)
	}
	slices.Sort(vals)
	for _, v := range vals {
		probs = append(probs, dist[v])
	}
	return vals, probs
}

// TestBootstrapExact checks Bootstrap's interval against the exact
// bootstrap distribution of the IQM (exactBootstrap, an independent
// computation by enumeration). An end e estimated as the p-quantile of B
// resampled IQMs has P(IQM < e) <= p + tol and P(IQM <= e) >= p - tol in
// the exact distribution, tol = 4 standard errors of a proportion,
// 4*sqrt(p(1-p)/B): 0.014 at the default 2,000 resamples, 0.002 at
// 100,000. The case "outlier" shows an interval far from IQM +- 2 SE that
// a width bound would not check.
func TestBootstrapExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    []float64
	}{
		{"spread", []float64{0.3, 1.1, 1.4, 2.0, 2.2, 2.9, 3.5, 4.8, 5.0, 7.5}},
		{"ties", []float64{1, 1, 1, 2, 2, 3, 5, 8, 8}},
		{"outlier", []float64{0.01, 0.02, 0.02, 0.03, 0.05, 0.08, 0.13, 9}},
		{"n=7, one cut", []float64{-1.5, -0.2, 0, 0.4, 0.9, 1.6, 2.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, probs := exactBootstrap(tc.x)
			var total float64
			for _, p := range probs {
				total += p
			}
			if math.Abs(total-1) > 1e-9 {
				t.Fatalf("exact distribution sums to %v", total)
			}
			// cdf returns P(IQM < v) and P(IQM <= v), v's own float
			// rounding aside.
			cdf := func(v float64) (below, upTo float64) {
				const eps = 1e-12
				for i, u := range vals {
					if u < v-eps {
						below += probs[i]
					}
					if u <= v+eps {
						upTo += probs[i]
					}
				}
				return below, upTo
			}
			for _, b := range []int{DefaultResamples, 100000} {
				s, err := Bootstrap(tc.x, b, 7)
				if err != nil {
					t.Fatal(err)
				}
				for _, end := range []struct {
					name string
					v, p float64
				}{{"lo", s.Lo, 0.025}, {"hi", s.Hi, 0.975}} {
					tol := 4 * math.Sqrt(end.p*(1-end.p)/float64(b))
					below, upTo := cdf(end.v)
					if below > end.p+tol || upTo < end.p-tol {
						t.Errorf("%d resamples: %s = %v has exact P(IQM < %s) = %.4f, P(IQM <= %s) = %.4f; want the %.3f quantile within %.4f",
							b, end.name, end.v, end.name, below, end.name, upTo, end.p, tol)
					}
				}
				t.Logf("%d resamples: [%.4f, %.4f], IQM %.4f", b, s.Lo, s.Hi, s.IQM)
			}
		})
	}
}
