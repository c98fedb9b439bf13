package vec

// SoftmaxCausal replaces each row i of att [nq, T] by the softmax of its
// first q0+i+1 entries (the keys query q0+i of causal attention may see)
// and zeroes the rest; q0+nq must not exceed T. The exponentials run over
// the whole matrix at once; masked entries are set to a large negative
// number first and zeroed after. It is portable Go over the package's
// vector routines.
func SoftmaxCausal(att []float32, nq, T, q0 int) {
	att = att[:nq*T]
	for i := 0; i < nq; i++ {
		row := att[i*T : (i+1)*T]
		n := q0 + i + 1
		Affine(row[:n], row[:n], 1, -Max(row[:n]))
		for j := range row[n:] {
			row[n+j] = -100
		}
	}
	Exp(att)
	for i := 0; i < nq; i++ {
		row := att[i*T : (i+1)*T]
		n := q0 + i + 1
		Affine(row[:n], row[:n], 1/Sum(row[:n]), 0)
		clear(row[n:])
	}
}
