package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/bench"
	"rgcpred/model/engine"
	"rgcpred/rollout"
	"rgcpred/serve/daemon"
	"rgcpred/serve/recorder"
)

// auditOptions are the flags of replay --from-stream: an offline re-run of
// a session predictord recorded with --record.
type auditOptions struct {
	stream, precision, policy string
}

func (a *auditOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&a.stream, "from-stream", "",
		"audit a session predictord recorded (--record STREAM): re-run it through --ckpt and compare every decision")
	fs.StringVar(&a.precision, "precision", "", "fp32, bf16 or int8: --from-stream re-runs in it (default: the session's), --check too (default: fp32 --embedded, else int8)")
	fs.StringVar(&a.policy, "policy", "", "with --from-stream: the spike policy (default: the recorded session's)")
}

// fromStream runs the audit and prints its report; it fails unless every
// replayed decision equals the recorded one.
func fromStream(ctx context.Context, o *options, stdout io.Writer) error {
	var policy rollout.Policy
	var err error
	if o.audit.policy != "" {
		if policy, err = rollout.ParsePolicy(o.audit.policy); err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
	}
	var prec engine.Precision // "": the recorded session's
	if o.audit.precision != "" {
		if prec, err = engine.ParsePrecision(o.audit.precision); err != nil {
			return fmt.Errorf("--precision: %w", err)
		}
	}
	mdl, err := bench.LoadEngine(o.ckpt, 0, o.threads, engine.FP32)
	if err != nil {
		return err
	}
	defer func() {
		if mdl.Close != nil {
			_ = mdl.Close()
		}
	}()
	eng := mdl.Predictor.(*engine.Engine)
	// The arithmetic: --precision, else the recorded session's.
	var fromSession func(p string) error
	if prec != "" {
		if err := eng.Force(prec); err != nil {
			return fmt.Errorf("--precision: %w", err)
		}
	} else {
		fromSession = recordedArith(eng)
	}
	nc, err := connect(o, "replay audit")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	var up, group []byte
	if o.authKeys != "" {
		k, err := deviceKeys(o.authKeys, o.device)
		if err != nil {
			return err
		}
		up = k.Up
		if group, err = groupKey(o.authKeys); err != nil {
			return err
		}
	}
	rep, err := recorder.Audit(ctx, recorder.StreamSource(js, o.audit.stream, o.device), recorder.AuditConfig{
		Predictor: mdl.Predictor, UpKey: up, GroupKey: group,
		Core:      daemon.Config{Known: mdl.Cells, Policy: policy},
		Precision: fromSession,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, rep.String())
	switch {
	case !rep.Judged():
		return errors.New("replay: the replayed decisions differ from the recorded ones")
	case !rep.Complete():
		return errors.New("replay: the recording is incomplete: it lacks spans of frames (holes)")
	}
	return nil
}

// recordedArith sets eng to a recorded session's arithmetic. A session
// served on a GPU ("cuda fp32", "cuda tf32") is refused, naming the way
// out: the CPU engine does not reproduce the device's arithmetic.
func recordedArith(eng *engine.Engine) func(p string) error {
	return func(p string) error {
		if strings.HasPrefix(p, "cuda ") {
			return errors.New("served on a GPU: the CPU engine does not reproduce its arithmetic bit for bit; pass --precision fp32 to audit against float32 on the CPU (decisions within rounding of a class boundary may then differ)")
		}
		return eng.Force(engine.Precision(p))
	}
}
