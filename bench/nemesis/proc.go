package nemesis

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// Proc is a child process the nemesis can kill -9, pause, resume and
// restart with the same arguments; its output goes to a log file.
type Proc struct {
	name, path, logPath string
	args                []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
	// starts counts the starts; from is where the latest one's output
	// begins in the log.
	starts int
	from   int64
}

// StartProc starts path with args, logging to logPath (appended).
func StartProc(name, path, logPath string, args ...string) (*Proc, error) {
	p := &Proc{name: name, path: path, logPath: logPath, args: args}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name returns the process's name in the topology.
func (p *Proc) Name() string { return p.name }

func (p *Proc) start() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("nemesis: %s: %w", p.name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("nemesis: %s: %w", p.name, err)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("nemesis: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit is the nemesis's doing or shows in the log
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.log = cmd, done, f
	p.starts++
	p.from = fi.Size()
	p.mu.Unlock()
	return nil
}

// Output returns the path of the process's log, where the latest start's
// output begins in it and the number of that start (1 the first).
func (p *Proc) Output() (path string, from int64, start int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logPath, p.from, p.starts
}

// Alive reports whether the process runs (or is paused).
func (p *Proc) Alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // fails only if it already ended
	<-done
}

// Pause sends SIGSTOP; Resume SIGCONT.
func (p *Proc) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT) }

func (p *Proc) signal(s syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("nemesis: %s not started", p.name)
	}
	if err := p.cmd.Process.Signal(s); err != nil {
		return fmt.Errorf("nemesis: %s: %v: %w", p.name, s, err)
	}
	return nil
}

// Restart starts the process again with the same arguments (after Kill).
func (p *Proc) Restart() error {
	if p.Alive() {
		return fmt.Errorf("nemesis: restart %s: still running", p.name)
	}
	return p.start()
}
