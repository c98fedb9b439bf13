package service

import (
	"errors"
	"sync"
	"time"

	"rgcpred/rgc"
)

// combiner is the predictor every device's core calls. It serialises the
// calls on the one model, and merges the calls that wait while the model
// is busy into one batch: when two devices' windows are due at the same
// time, the engine then runs them as one call (each window whole on a
// thread of its own, the engine's most efficient mode) instead of one
// call after the other. A caller gets exactly the probabilities its
// windows would get alone: the engine computes every window independently.
//
// The first waiting caller runs the merged batch for everyone (no extra
// goroutine); it copies the windows into buffers that grow to the largest
// merge seen and are then reused, so steady serving allocates nothing.
type combiner struct {
	mu   sync.Mutex
	cond sync.Cond
	p    rgc.Predictor
	// noExpect drops the announcements of calls (Config.NoExpect).
	noExpect bool
	gen      uint64 // bumped by swap
	busy     bool   // a caller is running a batch ...
	// ... on the predictor of generation runGen.
	runGen uint64
	wait   []*combineCall // calls not yet taken

	// Owned by the running caller.
	run    []*combineCall
	merged rgc.Batch
	out    []float32
	// handed counts the running caller's windows handed over from a
	// merged batch; handFirst (made once) hands them over.
	handed    int
	handFirst func(n int)
}

// combineCall is one Predict call waiting for, or taken into, a batch;
// each is PredictEach's done (nil for Predict).
type combineCall struct {
	b    *rgc.Batch
	out  []float32
	each func(n int)
	err  error
	done bool
}

var callPool = sync.Pool{New: func() any { return new(combineCall) }}

// newCombiner returns a combiner over p.
func newCombiner(p rgc.Predictor) *combiner {
	c := &combiner{p: p}
	c.cond.L = &c.mu
	c.handFirst = c.handOver
	return c
}

// handOver is a merged batch's done: the running caller's windows, first
// in the batch, among windows 0..n-1 go to the caller's done.
func (c *combiner) handOver(n int) {
	first := c.run[0]
	n = min(n, first.b.Len())
	if n <= c.handed {
		return
	}
	copy(first.out[c.handed*rgc.NumClasses:], c.out[c.handed*rgc.NumClasses:n*rgc.NumClasses])
	c.handed = n
	first.each(n)
}

// Predict implements rgc.Predictor.
func (c *combiner) Predict(b *rgc.Batch, out []float32) error {
	return c.PredictEach(b, out, nil)
}

// PredictEach implements rgc.Progressive. The caller that runs a batch
// has its windows handed over as the predictor computes them, when the
// predictor can (rgc.Progressive): its windows go first in a merged
// batch. The windows of calls merged into another's are final when their
// PredictEach returns.
func (c *combiner) PredictEach(b *rgc.Batch, out []float32, done func(n int)) error {
	call := callPool.Get().(*combineCall)
	*call = combineCall{b: b, out: out, each: done}
	c.mu.Lock()
	c.wait = append(c.wait, call)
	for !call.done {
		if c.busy {
			c.cond.Wait()
			continue
		}
		// Take every waiting call, this one included (first), and run
		// them.
		p := c.p
		c.busy, c.runGen = true, c.gen
		c.run = append(c.run[:0], call)
		for _, w := range c.wait {
			if w != call {
				c.run = append(c.run, w)
			}
		}
		clear(c.wait)
		c.wait = c.wait[:0]
		c.mu.Unlock()
		c.predict(p)
		c.mu.Lock()
		for i, r := range c.run {
			r.done = true
			c.run[i] = nil
		}
		c.busy = false
		c.cond.Broadcast()
	}
	err := call.err
	c.mu.Unlock()
	*call = combineCall{}
	callPool.Put(call)
	return err
}

// Expect implements rgc.Expecter: it passes the announcement on to the
// current predictor, if that can prepare for a call (and announcements are
// not off).
func (c *combiner) Expect(n int, d time.Duration) {
	if c.noExpect {
		return
	}
	c.mu.Lock()
	p := c.p
	c.mu.Unlock()
	if e, ok := p.(rgc.Expecter); ok {
		e.Expect(n, d)
	}
}

// predict runs the taken calls c.run on p: one call as it is, several as
// one merged batch. If the merged batch fails, each call runs alone, so
// that an error reaches only the call that caused it.
func (c *combiner) predict(p rgc.Predictor) {
	pe, progressive := p.(rgc.Progressive)
	first := c.run[0] // the running caller's own call
	if len(c.run) == 1 {
		if progressive && first.each != nil {
			first.err = pe.PredictEach(first.b, first.out, first.each)
			return
		}
		first.err = p.Predict(first.b, first.out)
		return
	}
	n := 0
	for _, r := range c.run {
		if err := r.b.Check(); err != nil || len(r.out) < r.b.Len()*rgc.NumClasses {
			c.alone(p)
			return
		}
		n += r.b.Len()
	}
	m := &c.merged
	m.Inputs, m.Cells, m.Ends = m.Inputs[:0], m.Cells[:0], m.Ends[:0]
	for _, r := range c.run {
		m.Inputs = append(m.Inputs, r.b.Inputs...)
		m.Cells = append(m.Cells, r.b.Cells...)
		m.Ends = append(m.Ends, r.b.Ends...)
	}
	if cap(c.out) < n*rgc.NumClasses {
		c.out = make([]float32, n*rgc.NumClasses)
	}
	out := c.out[:n*rgc.NumClasses]
	var err error
	if progressive && first.each != nil {
		// The caller's windows, first in the merged batch, are handed
		// over as they come.
		c.handed = 0
		err = pe.PredictEach(m, out, c.handFirst)
	} else {
		err = p.Predict(m, out)
	}
	if err != nil {
		c.alone(p)
		return
	}
	for _, r := range c.run {
		k := r.b.Len() * rgc.NumClasses
		copy(r.out, out[:k])
		out = out[k:]
	}
}

// alone runs each taken call by itself.
func (c *combiner) alone(p rgc.Predictor) {
	for _, r := range c.run {
		r.err = p.Predict(r.b, r.out)
	}
}

// swap replaces the predictor: batches taken from now on run on p. It
// returns once no batch runs on the old one, which may then be closed.
func (c *combiner) swap(p rgc.Predictor) error {
	if p == nil {
		return errors.New("swap in a nil predictor")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.p = p
	c.gen++
	for c.busy && c.runGen != c.gen {
		c.cond.Wait()
	}
	return nil
}
