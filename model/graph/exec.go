package graph

import (
	"fmt"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"rgcpred/base/vec"
)

// executor runs a built graph: its live nodes (see newExecutor) in
// topological order, each op called directly on the values of its
// children. It takes the place of gorgonia's tape machine, which allocates
// an argument slice per instruction and a fresh tensor for each of
// gorgonia's own operations on every run. Here the kernels write into
// their own buffers and gorgonia's additions (the residual connections,
// and the sums that gorgonia's Grad builds for the gradient of a node with
// several consumers) into buffers of the executor, so a run after the
// first allocates no tensors.
type executor struct {
	steps []execStep
	vals  []G.Value // by position in the topological order
	index map[*G.Node]int
	par   parallel
	add   addRows // the parallel section of addTo32
}

// execStep is one op node of the graph.
type execStep struct {
	n    *G.Node
	in   []int         // positions of the children
	args []G.Value     // the children's values, refilled every run
	out  int           // position of the node
	sum  *tensor.Dense // output buffer of a gorgonia addition (else nil)
}

// newExecutor orders g's nodes and binds the leaves' values (inputs,
// weights: bound once, their tensors are written in place). It keeps only
// the ops that roots depend on: gorgonia's Backpropagate also builds the
// gradient of every differentiable input of an op on the loss's path,
// among them the data gradient of the first convolution, which no
// parameter's gradient reads. So an op's side effects (batch norm's
// running statistics) happen only if its output is read.
func newExecutor(g *G.ExprGraph, par parallel, roots G.Nodes) (*executor, error) {
	sorted, err := G.Sort(g)
	if err != nil {
		return nil, fmt.Errorf("graph: order nodes: %w", err)
	}
	e := &executor{vals: make([]G.Value, len(sorted)), index: make(map[*G.Node]int, len(sorted)), par: par}
	// G.Sort puts the roots first: run from the last.
	for i := range sorted {
		e.index[sorted[len(sorted)-1-i]] = i
	}
	live := liveNodes(g, roots)
	for i := range sorted {
		n := sorted[len(sorted)-1-i]
		if !live[n] {
			continue
		}
		if n.Op() == nil {
			if n.Value() == nil {
				return nil, fmt.Errorf("graph: input %s has no value", n.Name())
			}
			e.vals[i] = n.Value()
			continue
		}
		s := execStep{n: n, out: i}
		for it := g.From(n.ID()); it.Next(); {
			c := it.Node().(*G.Node)
			j, ok := e.index[c]
			if !ok || j >= i {
				return nil, fmt.Errorf("graph: node %s: child %s out of order", n.Name(), c.Name())
			}
			s.in = append(s.in, j)
		}
		s.args = make([]G.Value, len(s.in))
		if isSum(n, sorted, s.in, len(sorted)) {
			s.sum = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(n.Shape()...))
		}
		e.steps = append(e.steps, s)
	}
	return e, nil
}

// liveNodes returns roots and every node they depend on.
func liveNodes(g *G.ExprGraph, roots G.Nodes) map[*G.Node]bool {
	live := make(map[*G.Node]bool)
	stack := append(G.Nodes{}, roots...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if live[n] {
			continue
		}
		live[n] = true
		for it := g.From(n.ID()); it.Next(); {
			stack = append(stack, it.Node().(*G.Node))
		}
	}
	return live
}

// isSum reports whether n is gorgonia's element-wise addition of two
// float32 tensors of n's own shape (no broadcasting), which the executor
// computes into its own buffer.
func isSum(n *G.Node, sorted G.Nodes, in []int, total int) bool {
	if len(in) != 2 || n.Dtype() != tensor.Float32 || n.IsScalar() || !strings.HasPrefix(n.Op().String(), "+ ") {
		return false
	}
	for _, j := range in {
		c := sorted[total-1-j]
		if c.IsScalar() || !c.Shape().Eq(n.Shape()) || c.Dtype() != tensor.Float32 {
			return false
		}
	}
	return true
}

// run executes every kept op once.
func (e *executor) run() error {
	for k := range e.steps {
		s := &e.steps[k]
		for a, j := range s.in {
			s.args[a] = e.vals[j]
		}
		if s.sum != nil {
			x, ok1 := s.args[0].(*tensor.Dense)
			y, ok2 := s.args[1].(*tensor.Dense)
			if !ok1 || !ok2 {
				return fmt.Errorf("graph: %s: operands are %T and %T", s.n.Name(), s.args[0], s.args[1])
			}
			addTo32(e.par, &e.add, f32(s.sum), f32(x), f32(y))
			e.vals[s.out] = s.sum
			continue
		}
		v, err := s.n.Op().Do(s.args...)
		if err != nil {
			return fmt.Errorf("graph: %s: %w", s.n.Name(), err)
		}
		e.vals[s.out] = v
	}
	return nil
}

// value returns n's value of the last run (nil if n is not in the graph or
// has not run).
func (e *executor) value(n *G.Node) G.Value {
	i, ok := e.index[n]
	if !ok {
		return nil
	}
	return e.vals[i]
}

// addTo32 sets d = x + y, split over the workers when long enough to pay for
// the hand-off; a is the section's body, set here (see body).
func addTo32(par parallel, a *addRows, d, x, y []float32) {
	if len(d) < 1<<15 {
		vec.Add(d, x, y)
		return
	}
	*a = addRows{d: d, x: x, y: y}
	par.run(len(d), a)
}

// addRows is addTo32's parallel section: d = x + y.
type addRows struct{ d, x, y []float32 }

func (a *addRows) chunk(lo, hi, _ int) { vec.Add(a.d[lo:hi], a.x[lo:hi], a.y[lo:hi]) }
