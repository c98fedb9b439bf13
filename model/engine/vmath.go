package engine

// Portable versions of the vector helpers (vmath_amd64.go, vmath_other.go);
// the AVX2 versions use them for the tails shorter than 8.

func addToGo(dst, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += v
	}
}

func gateReluGo(out, h, g, s []float32) {
	h, g, s = h[:len(out)], g[:len(out)], s[:len(out)]
	for i := range out {
		v := h[i]*g[i] + s[i]
		if v < 0 {
			v = 0
		}
		out[i] = v
	}
}

func maxOfGo(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}

func matvecAddGo(x, w, y []float32) {
	out := len(y)
	for i, xi := range x {
		row := w[i*out : (i+1)*out]
		for j, v := range row {
			y[j] += xi * v
		}
	}
}

func sumGo(x []float32) float32 {
	var s float32
	for _, v := range x {
		s += v
	}
	return s
}

func scaleAddGo(x []float32, a, b float32) {
	for i, v := range x {
		x[i] = v*a + b
	}
}

func sumSqDevGo(x []float32, m float32) float32 {
	var s float32
	for _, v := range x {
		d := v - m
		s += d * d
	}
	return s
}

func normGo(y, x, w, b []float32, m, inv float32) {
	y, w, b = y[:len(x)], w[:len(x)], b[:len(x)]
	for i, v := range x {
		y[i] = (v-m)*inv*w[i] + b[i]
	}
}
