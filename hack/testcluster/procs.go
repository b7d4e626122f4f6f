package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one running component.
type process struct {
	name string
	args []string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, valid once done is closed
	// stopped is set (under supervisor.mu) when the supervisor stops the process on purpose,
	// so that its exit is not taken for a crash.
	stopped bool
}

// supervisor starts components as child processes and stops them in reverse order.
//
// Children get SIGKILL from the kernel when the supervisor dies (Pdeathsig), so a killed
// supervisor leaves nothing behind. Pdeathsig fires when the *thread* that started the child
// exits, so every child is started from the main goroutine, which main() locks to the main thread.
type supervisor struct {
	dir, bin string

	mu       sync.Mutex
	procs    []*process
	stopping bool
	// died receives the first component that exits while the supervisor is not stopping.
	died chan *process
}

func newSupervisor(dir, bin string) *supervisor {
	return &supervisor{dir: dir, bin: bin, died: make(chan *process, 1)}
}

// binaryOf is the binary a component runs: its name without an instance suffix `-<digits>`
// (kube-apiserver-2 runs kube-apiserver).
func binaryOf(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 && i < len(name)-1 && strings.Trim(name[i+1:], "0123456789") == "" {
		return name[:i]
	}
	return name
}

// start runs bin/<name> (without an instance suffix, see binaryOf) with args, its output appended
// to dir/logs/<name>.log.
func (s *supervisor) start(name string, args ...string) (*process, error) {
	logPath := filepath.Join(s.dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(filepath.Join(s.bin, binaryOf(name)), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = s.dir
	cmd.SysProcAttr = childProcAttr()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, fmt.Errorf("not starting %s: shutting down", name)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, args: args, cmd: cmd, log: logPath, done: make(chan struct{})}
	s.procs = append(s.procs, p)
	if err := appendLine(filepath.Join(s.dir, "pids"), fmt.Sprintf("%d %s", cmd.Process.Pid, name)); err != nil {
		return p, err
	}
	logf("started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.stopping && !p.stopped {
			select {
			case s.died <- p:
			default:
			}
		}
	}()
	return p, nil
}

// stopAll stops every component, the last started first: SIGTERM, then SIGKILL after a grace period.
func (s *supervisor) stopAll(grace time.Duration) {
	s.mu.Lock()
	s.stopping = true
	procs := append([]*process(nil), s.procs...)
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			logf("stopped %s", p.name)
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
			logf("killed %s (no exit %s after SIGTERM)", p.name, grace)
		}
	}
}

// toggle stops the component `name` when it runs (SIGTERM, then SIGKILL after grace; its exit is
// not a crash) and returns true; when it was stopped this way, it starts it again with the same
// arguments and returns false. Like start, it must be called from the main goroutine.
func (s *supervisor) toggle(name string, grace time.Duration) (stopped bool, err error) {
	s.mu.Lock()
	index := -1
	for i, p := range s.procs {
		if p.name == name {
			index = i
		}
	}
	if index < 0 || s.stopping {
		s.mu.Unlock()
		return false, fmt.Errorf("cannot stop or start %s: unknown", name)
	}
	old := s.procs[index]
	select {
	case <-old.done:
		// Stopped before: start it again in its place.
		s.mu.Unlock()
		p, err := s.start(name, old.args...)
		if err != nil {
			return false, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.procs = s.procs[:len(s.procs)-1]
		s.procs[index] = p
		return false, nil
	default:
	}
	old.stopped = true
	s.mu.Unlock()
	_ = old.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-old.done:
	case <-time.After(grace):
		_ = old.cmd.Process.Kill()
		<-old.done
	}
	logf("stopped %s (pid %d)", name, old.cmd.Process.Pid)
	return true, nil
}

// restart stops the component `name` (SIGTERM, then SIGKILL after grace) and starts it again with
// the same arguments, in the same place of the stop order. Like start, it must be called from the
// main goroutine.
func (s *supervisor) restart(name string, grace time.Duration) error {
	s.mu.Lock()
	index := -1
	for i, p := range s.procs {
		if p.name == name {
			index = i
		}
	}
	if index < 0 || s.stopping {
		s.mu.Unlock()
		return fmt.Errorf("cannot restart %s: not running", name)
	}
	old := s.procs[index]
	old.stopped = true
	s.mu.Unlock()

	_ = old.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-old.done:
	case <-time.After(grace):
		_ = old.cmd.Process.Kill()
		<-old.done
	}
	logf("stopped %s (pid %d) for a restart", name, old.cmd.Process.Pid)
	p, err := s.start(name, old.args...)
	if err != nil {
		return err
	}
	// start appended it; move it back to where the old one was.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = s.procs[:len(s.procs)-1]
	s.procs[index] = p
	return nil
}

// tail returns the last lines of a component's log, for error messages.
func (p *process) tail(lines int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	data = bytes.TrimRight(data, "\n")
	parts := bytes.Split(data, []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
