package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"rgcpred/stream"
)

// The NATS micro service (github.com/nats-io/nats.go/micro) every running
// predictord registers: `nats micro ls`, `nats micro info predictord` and
// `nats micro stats predictord` list the instances, and its endpoints answer
// JSON requests for status and control (docs/operations.md). The devices'
// own subjects (docs/protocol.md) are plain subscriptions, unchanged: the
// 992 Hz frame stream keeps its own queue, pending limits and slow-consumer
// accounting, apart from the endpoints' subscriptions, which the micro
// library owns and handles as its own.
const (
	// MicroName is the service name every instance registers.
	MicroName = "predictord"
	// MicroVersion is the version of the endpoints' JSON API (semver).
	MicroVersion = "1.0.0"
	// MicroGroup is the subject prefix of the endpoints:
	// predictord.status, predictord.info, predictord.reload, predictord.reset.
	MicroGroup = "predictord"
	// microResetWait bounds the wait for a reset requested on the reset
	// endpoint to be applied.
	microResetWait = 5 * time.Second
)

// Error codes of the endpoints' service-error headers (Nats-Service-Error-Code).
const (
	codeBadRequest  = "400"
	codeFailed      = "500"
	codeUnavailable = "503"
	codeTimeout     = "504"
)

// MicroRequest is the optional JSON body of an endpoint request. Every
// instance receives every request (the endpoints have no queue group); the
// filters pick who answers: an instance that does not serve Device, or whose
// id is not Instance, stays silent. An empty body (or {}) addresses every
// instance and every device.
type MicroRequest struct {
	// Device restricts the request to one device (required by reset).
	Device string `json:"device,omitempty"`
	// Instance restricts the request to the instance of this micro id.
	Instance string `json:"instance,omitempty"`
}

// DeviceStatus is one device's state in a status reply.
type DeviceStatus struct {
	Device string `json:"device"`
	// Epoch is the current stream epoch (0 before the first stream).
	Epoch uint32 `json:"epoch"`
	// FirstSeq is the current stream's first frame (-1 when none runs).
	FirstSeq int64 `json:"first_seq"`
	// LastSeq is the last frame processed (-1 if none).
	LastSeq int64 `json:"last_seq"`
	// Frames counts the frames accepted since start.
	Frames uint64 `json:"frames"`
	// LagBins is the frames received and queued, not yet processed.
	LagBins int64 `json:"lag_bins"`
	// QueuedMessages counts the frames and control messages waiting.
	QueuedMessages int64 `json:"queued_messages"`
	// FrameAgeSeconds is the time since the last valid frames message
	// (absent before the first).
	FrameAgeSeconds *float64 `json:"frame_age_seconds,omitempty"`
	// Predictions, Spikes: windows predicted and spike decisions published.
	Predictions uint64 `json:"predictions"`
	Spikes      uint64 `json:"spikes"`
	// Skipped counts skipped decisions published (DeadlineMisses +
	// PredictErrors).
	Skipped        uint64 `json:"skipped"`
	DeadlineMisses uint64 `json:"deadline_misses"`
	PredictErrors  uint64 `json:"predict_errors"`
	// GapBins, Restarts, Resets, Histories: as the metrics of these names.
	GapBins   uint64 `json:"gap_bins"`
	Restarts  uint64 `json:"stream_restarts"`
	Resets    uint64 `json:"resets"`
	Histories uint64 `json:"histories"`
	// Rejected counts the messages, frames and histories rejected;
	// RejectedBy splits it by reason (docs/protocol.md).
	Rejected   uint64            `json:"rejected"`
	RejectedBy map[string]uint64 `json:"rejected_by_reason"`
	// Cells is the number of cells served for the device.
	Cells int `json:"cells"`
	// PendingResetAt is the frame before which a reset announced on the
	// control subject applies (hot standby; absent when none is pending).
	PendingResetAt *int64 `json:"pending_reset_at,omitempty"`
}

// StatusReply is one instance's reply on predictord.status.
type StatusReply struct {
	Instance string `json:"instance"`
	// Ready is /readyz's state; NotReady its reason when false.
	Ready    bool   `json:"ready"`
	NotReady string `json:"not_ready,omitempty"`
	// Model describes the checkpoint being served.
	Model  string `json:"model"`
	Shard  int    `json:"shard"`
	Shards int    `json:"shards"`
	// Devices holds the served devices (the one asked for, with a filter).
	Devices []DeviceStatus `json:"devices"`
}

// InfoReply is one instance's reply on predictord.info: its configuration
// and the cells it serves.
type InfoReply struct {
	Instance  string `json:"instance"`
	Model     string `json:"model"`
	ModelPath string `json:"model_path"`
	// CheckpointCells is the number of cells the checkpoint knows.
	CheckpointCells int `json:"checkpoint_cells"`
	// Cells are the cluster ids served, ascending; TotalCells the device's
	// cells over all shards.
	Cells      []int `json:"cells"`
	TotalCells int   `json:"total_cells"`
	Shard      int   `json:"shard"`
	Shards     int   `json:"shards"`
	Stagger    bool  `json:"stagger"`
	MaxBatch   int   `json:"max_batch"`
	MaxLag     int64 `json:"max_lag"`
	// PublishSilence: "no spike" decisions are published too.
	PublishSilence bool `json:"publish_silence"`
	// Devices maps each served device to its subjects.
	Devices []DeviceSubjects `json:"devices"`
}

// DeviceSubjects are a device's NATS subjects (docs/protocol.md).
type DeviceSubjects struct {
	Device string `json:"device"`
	Stim   string `json:"stim"`
	Spikes string `json:"spikes"`
	Ctl    string `json:"ctl"`
	Status string `json:"status"`
	Events string `json:"events"`
}

// ReloadReply is the reply on predictord.reload after a successful reload.
type ReloadReply struct {
	Instance string `json:"instance"`
	Model    string `json:"model"`
}

// ResetReply is the reply on predictord.reset once the reset was applied.
type ResetReply struct {
	Instance string `json:"instance"`
	Device   string `json:"device"`
	// Resets counts the device's resets since start, this one included.
	Resets uint64 `json:"resets"`
	// At is the frame (seq) before which the group applied the reset, on
	// the instance that announced it in a hot-standby group (absent
	// otherwise).
	At int64 `json:"at,omitempty"`
}

// StatsData is the data of the status endpoint in `nats micro stats`: a
// summary of the instance per device.
type StatsData struct {
	Model   string                 `json:"model"`
	Cells   int                    `json:"cells"`
	Ready   bool                   `json:"ready"`
	Devices map[string]DeviceStats `json:"devices"`
}

// DeviceStats is one device's counters in StatsData.
type DeviceStats struct {
	Epoch    uint32 `json:"epoch"`
	LastSeq  int64  `json:"last_seq"`
	Frames   uint64 `json:"frames"`
	Spikes   uint64 `json:"spikes"`
	Skipped  uint64 `json:"skipped"`
	Rejected uint64 `json:"rejected"`
	LagBins  int64  `json:"lag_bins"`
}

// MicroID returns the micro instance id of the running service ("" when
// Run has not registered it).
func (s *Service) MicroID() string {
	if id := s.microID.Load(); id != nil {
		return *id
	}
	return ""
}

// startMicro registers the micro service and its endpoints on nc.
func (s *Service) startMicro(nc *nats.Conn) (micro.Service, error) {
	mdl := s.model.Load()
	ms, err := micro.AddService(nc, micro.Config{
		Name:        MicroName,
		Version:     MicroVersion,
		Description: "real-time retinal ganglion cell spike prediction (docs/operations.md)",
		Metadata: map[string]string{
			"devices":          strings.Join(s.cfg.Devices, ","),
			"cells":            strconv.Itoa(len(s.cells)),
			"total_cells":      strconv.Itoa(len(s.all)),
			"shard":            fmt.Sprintf("%d/%d", s.cfg.Shard, s.cfg.Shards),
			"model":            mdl.Name,
			"model_path":       s.cfg.ModelPath,
			"protocol_version": strconv.Itoa(stream.Version),
			"build":            buildVersion(),
		},
		StatsHandler: s.microStats,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Error().Str("subject", e.Subject).Str("error", e.Description).Msg("micro service error")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("register micro service %s: %w", MicroName, err)
	}
	id := ms.Info().ID
	s.microID.Store(&id)
	g := ms.AddGroup(MicroGroup, micro.WithGroupQueueGroupDisabled())
	for _, ep := range []struct {
		name, desc string
		h          func(micro.Request, MicroRequest)
	}{
		{"status", "JSON status per device: epoch, frames, lag, rejections by reason, decisions", s.microStatus},
		{"info", "JSON configuration: model, cells, shard, devices and their subjects", s.microInfo},
		{"reload", "reload the checkpoint (as SIGHUP); the old model stays on failure", s.microReload},
		{"reset", `reset a device's stream and cell states (as its reset control message); body {"device":"..."}`, s.microReset},
	} {
		h := ep.h
		handler := micro.HandlerFunc(func(r micro.Request) {
			q, err := parseMicroRequest(r.Data())
			if err != nil {
				s.microError(r, codeBadRequest, err.Error())
				return
			}
			if !s.addressed(q) {
				return // another instance answers
			}
			h(r, q)
		})
		if err := g.AddEndpoint(ep.name, handler, micro.WithEndpointMetadata(map[string]string{"description": ep.desc})); err != nil {
			_ = ms.Stop()
			return nil, fmt.Errorf("add micro endpoint %s: %w", ep.name, err)
		}
	}
	return ms, nil
}

// buildVersion names the running binary's build: the VCS revision
// (suffixed "+dirty" for a modified tree) and the Go version, as far as the
// build recorded them.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			dirty = st.Value == "true"
		}
	}
	if rev == "" {
		return bi.GoVersion
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev + " " + bi.GoVersion
}

// parseMicroRequest decodes an endpoint request body (empty: no filter).
func parseMicroRequest(b []byte) (MicroRequest, error) {
	var q MicroRequest
	if len(bytes.TrimSpace(b)) == 0 {
		return q, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return q, fmt.Errorf("request body: want JSON {\"device\": ..., \"instance\": ...}: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return q, errors.New("request body: trailing data after the JSON object")
	}
	return q, nil
}

// addressed reports whether this instance answers q.
func (s *Service) addressed(q MicroRequest) bool {
	if q.Instance != "" && q.Instance != s.MicroID() {
		return false
	}
	return q.Device == "" || s.device(q.Device) != nil
}

// device returns the served device named name, nil if none.
func (s *Service) device(name string) *device {
	for _, d := range s.devices {
		if d.name == name {
			return d
		}
	}
	return nil
}

// microError answers r with a service error, logging a failure to answer.
func (s *Service) microError(r micro.Request, code, desc string) {
	if err := r.Error(code, desc, nil); err != nil {
		s.log.Warn().Err(err).Str("subject", r.Subject()).Msg("answer micro request")
	}
}

// microRespond answers r with v as JSON.
func (s *Service) microRespond(r micro.Request, v any) {
	if err := r.RespondJSON(v); err != nil {
		s.log.Warn().Err(err).Str("subject", r.Subject()).Msg("answer micro request")
	}
}

// Status returns the instance's status: every served device, or only the
// device named (nil: none such).
func (s *Service) Status(device string) *StatusReply {
	st := &StatusReply{Instance: s.MicroID(), Ready: true, Model: s.model.Load().Name, Shard: s.cfg.Shard, Shards: s.cfg.Shards}
	if err := s.Readiness(); err != nil {
		st.Ready, st.NotReady = false, err.Error()
	}
	for _, d := range s.devices {
		if device == "" || d.name == device {
			st.Devices = append(st.Devices, d.jsonStatus())
		}
	}
	if st.Devices == nil {
		return nil
	}
	return st
}

// jsonStatus returns the device's status counters.
func (d *device) jsonStatus() DeviceStatus {
	d.snapMu.Lock()
	c := d.prev
	d.snapMu.Unlock()
	d.rejectedMu.Lock()
	by := maps.Clone(d.rejectedBy)
	d.rejectedMu.Unlock()
	st := DeviceStatus{
		Device: d.name, Epoch: d.epoch.Load(), FirstSeq: d.first.Load(), LastSeq: d.last.Load(),
		Frames: c.Frames, LagBins: max(d.queuedFrames.Load(), 0), QueuedMessages: d.queuedMsgs.Load() + d.queuedCtl.Load(),
		Predictions: c.Predictions, Spikes: c.Spikes, Skipped: d.skipped.Load(),
		DeadlineMisses: c.DeadlineMisses, PredictErrors: c.PredictErrors,
		GapBins: c.GapBins, Restarts: c.Restarts, Resets: c.Resets, Histories: c.Histories,
		Rejected: d.rejected.Load(), RejectedBy: by, Cells: len(d.s.cells),
	}
	if age, ok := d.frameAge(); ok {
		sec := age.Seconds()
		st.FrameAgeSeconds = &sec
	}
	if at := d.resetAt.Load(); at >= 0 {
		st.PendingResetAt = &at
	}
	return st
}

func (s *Service) microStatus(r micro.Request, q MicroRequest) {
	s.microRespond(r, s.Status(q.Device))
}

func (s *Service) microInfo(r micro.Request, q MicroRequest) {
	mdl := s.model.Load()
	info := &InfoReply{
		Instance: s.MicroID(), Model: mdl.Name, ModelPath: s.cfg.ModelPath, CheckpointCells: len(s.known),
		Cells: slices.Clone(s.cells), TotalCells: len(s.all), Shard: s.cfg.Shard, Shards: s.cfg.Shards,
		Stagger: s.cfg.Stagger, MaxBatch: s.maxBatch, MaxLag: s.cfg.MaxLag, PublishSilence: s.cfg.PublishSilence,
	}
	for _, d := range s.devices {
		if q.Device == "" || d.name == q.Device {
			info.Devices = append(info.Devices, DeviceSubjects{
				Device: d.name, Stim: d.stimSubj, Spikes: d.sink.subject, Ctl: d.ctlSubj,
				Status: stream.StatusSubject(d.name), Events: d.eventSubj,
			})
		}
	}
	s.microRespond(r, info)
}

func (s *Service) microReload(r micro.Request, _ MicroRequest) {
	s.log.Info().Str("subject", r.Subject()).Msg("reload requested over NATS")
	if err := s.Reload(); err != nil {
		s.microError(r, codeFailed, "reload failed, the old model stays: "+err.Error())
		return
	}
	s.microRespond(r, &ReloadReply{Instance: s.MicroID(), Model: s.model.Load().Name})
}

// microReset queues a reset control message for the device, in order with
// its frames, and answers once the processor applied it.
func (s *Service) microReset(r micro.Request, q MicroRequest) {
	if q.Device == "" {
		s.microError(r, codeBadRequest, `reset needs a device: {"device":"..."}`)
		return
	}
	d := s.device(q.Device)
	if !s.running.Load() {
		s.microError(r, codeUnavailable, "not serving (starting or draining)")
		return
	}
	d.snapMu.Lock()
	before := d.prev.Resets
	d.snapMu.Unlock()
	var at int64 = -1
	if s.standbyOn() {
		var code, msg string
		if at, code, msg = d.groupReset(); code != "" {
			s.microError(r, code, msg)
			return
		}
	} else {
		payload, err := stream.AppendControl(nil, &stream.Control{Op: stream.OpReset})
		if err != nil {
			s.microError(r, codeFailed, "encode reset: "+err.Error())
			return
		}
		select {
		case d.raw <- &nats.Msg{Subject: d.ctlSubj, Data: payload}:
		default:
			s.microError(r, codeUnavailable, "device queue full: reset not queued, retry")
			return
		}
		s.log.Info().Str("device", d.name).Msg("reset requested over NATS")
	}
	deadline := time.NewTimer(microResetWait)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		d.snapMu.Lock()
		n := d.prev.Resets
		d.snapMu.Unlock()
		if n > before {
			s.microRespond(r, &ResetReply{Instance: s.MicroID(), Device: d.name, Resets: n, At: max(at, 0)})
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			if s.standbyOn() {
				s.microError(r, codeTimeout, fmt.Sprintf("reset not applied within %v: the group applies it at the device's frame %d "+
					"(-1: this instance is a standby and saw no reset from the holder); a device that sends no frames is not reset",
					microResetWait, at))
				return
			}
			s.microError(r, codeTimeout, fmt.Sprintf("reset queued but not applied within %v (control queue full or daemon overloaded)", microResetWait))
			return
		}
	}
}

// microStats is the micro StatsHandler: the status endpoint's data is a
// summary of every device (StatsData); info's the cells and shard, reload's
// the model served, reset's each device's resets.
func (s *Service) microStats(e *micro.Endpoint) any {
	switch e.Name {
	case "info":
		return map[string]any{"cells": len(s.cells), "total_cells": len(s.all), "shard": fmt.Sprintf("%d/%d", s.cfg.Shard, s.cfg.Shards)}
	case "reload":
		return map[string]string{"model": s.model.Load().Name, "model_path": s.cfg.ModelPath}
	case "reset":
		resets := map[string]uint64{}
		for _, d := range s.devices {
			resets[d.name] = d.jsonStatus().Resets
		}
		return map[string]any{"resets": resets}
	case "status":
	default:
		return nil
	}
	out := StatsData{Model: s.model.Load().Name, Cells: len(s.cells), Ready: s.Ready(), Devices: map[string]DeviceStats{}}
	for _, d := range s.devices {
		st := d.jsonStatus()
		out.Devices[d.name] = DeviceStats{Epoch: st.Epoch, LastSeq: st.LastSeq, Frames: st.Frames, Spikes: st.Spikes,
			Skipped: st.Skipped, Rejected: st.Rejected, LagBins: st.LagBins}
	}
	return out
}
