package service

import (
	"runtime"
	"time"

	"rgcpred/base/rt"
	"rgcpred/base/spin"
)

// enterRealTime applies Config.RealTime to the process (rt.Apply) and
// gives the Go scheduler one more P per device, since each device's
// processor may hold one while it polls and the network poller needs one
// free. It logs what it applied and, as a warning, each part it could not
// (the service serves on without it). The returned function reverts both.
func (s *Service) enterRealTime() (leave func()) {
	if s.cfg.RealTime == nil {
		return func() {}
	}
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + len(s.devices))
	st, err := rt.Apply(*s.cfg.RealTime)
	if err != nil {
		s.log.Warn().Err(err).Str("applied", st.String()).
			Msg("real-time mode: the parts named in the error are off; serving without them")
	} else {
		s.log.Info().Str("applied", st.String()).Int("gomaxprocs", procs+len(s.devices)).Msg("real-time mode")
	}
	return func() {
		if err := st.Undo(); err != nil {
			s.log.Warn().Err(err).Msg("leave real-time mode")
		}
		runtime.GOMAXPROCS(procs)
	}
}

// poll takes the next queued message if one comes without waiting (got
// false otherwise; ok false once the queue is closed). In real-time mode,
// when the next frame brings a due window, it polls the queue until about
// that frame's arrival (daemon.Core.PollFor after the last frames
// message's) before the caller parks, so that the frame is taken at once
// on a core that is awake.
func (d *device) poll() (it item, ok, got bool) {
	var budget time.Duration
	if d.s.cfg.RealTime != nil {
		if budget = d.core.PollFor(); budget > 0 {
			budget -= time.Duration(time.Now().UnixNano() - d.lastFrame.Load())
		}
	}
	return spin.Poll(d.work, budget)
}
