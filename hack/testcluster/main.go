// Command testcluster runs a real Kubernetes control plane on 127.0.0.1 for olm-rs tests:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and kwok, which simulates the
// kubelets of fake nodes so that Pods are scheduled, become Ready, and go away when deleted.
//
//	testcluster up --dir DIR --bin BIN [--nodes 2] [--timeout 3m] [--owner-pid PID]
//
// `up` starts every component as a child process (logs in DIR/logs), writes an admin kubeconfig to
// DIR/kubeconfig, waits until the API server is ready, the fake nodes are Ready and the `default`
// ServiceAccount exists, then writes DIR/ready and blocks. On SIGINT or SIGTERM it stops the
// components in reverse order and exits 0; if a component dies, it stops the rest and exits 1.
// With --owner-pid it also stops, and removes DIR, once that process is gone, so that a test run
// killed outright leaves nothing behind. On SIGUSR1 it restarts kube-apiserver (an outage for the
// tests to survive) and, once it is ready again, writes the number of restarts so far to
// DIR/apiserver-restarts. hack/cluster.sh is the usual way to run it.
//
//	testcluster check --kubeconfig FILE [--nodes 1] [--max-lease-age 40s]
//
// `check` exits 1, naming each problem, when a fake node is not Ready or its Lease in
// kube-node-lease was not renewed within --max-lease-age, or when fewer than --nodes fake nodes
// exist; 0 when the nodes are healthy.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func init() {
	// Children are started from the main goroutine; keeping it on the main thread, which lives as
	// long as the process, makes their Pdeathsig fire only when the supervisor itself dies.
	runtime.LockOSThread()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testcluster %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testcluster up --dir DIR --bin BIN [--nodes N] [--timeout DURATION] [--owner-pid PID]")
	fmt.Fprintln(os.Stderr, "       testcluster check --kubeconfig FILE [--nodes N] [--max-lease-age DURATION]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "up":
		mainUp()
	case "check":
		mainCheck()
	default:
		usage()
	}
}

func mainCheck() {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig of the cluster")
	nodes := fs.Int("nodes", 1, "how many fake nodes must exist")
	maxAge := fs.Duration("max-lease-age", maxLeaseAge, "the oldest Lease renewal a healthy node may show")
	_ = fs.Parse(os.Args[2:])
	if *kubeconfig == "" || fs.NArg() != 0 {
		usage()
	}
	client, err := clientFor(*kubeconfig)
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := checkNodes(ctx, client, *nodes, *maxAge); err != nil {
		logf("the fake nodes are not healthy: %v", err)
		os.Exit(1)
	}
	logf("the fake nodes are Ready, their Leases renewed within the last %s", *maxAge)
}

func mainUp() {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	var cfg config
	fs.StringVar(&cfg.dir, "dir", "", "state directory (created; PKI, etcd data, logs, kubeconfig)")
	fs.StringVar(&cfg.bin, "bin", "", "directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok")
	fs.IntVar(&cfg.nodes, "nodes", 2, "number of fake nodes")
	fs.DurationVar(&cfg.timeout, "timeout", 3*time.Minute, "how long start-up may take")
	fs.IntVar(&cfg.ownerPID, "owner-pid", 0, "stop, and remove --dir, once this process is gone")
	_ = fs.Parse(os.Args[2:])
	if cfg.dir == "" || cfg.bin == "" || cfg.nodes < 1 || fs.NArg() != 0 {
		usage()
	}
	var err error
	if cfg.dir, err = filepath.Abs(cfg.dir); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	if cfg.bin, err = filepath.Abs(cfg.bin); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	if err := up(cfg); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
}

type config struct {
	dir, bin string
	nodes    int
	timeout  time.Duration
	ownerPID int
}

var (
	// errInterrupted is the cause of a shutdown by signal, which is a clean exit.
	errInterrupted = errors.New("interrupted")
	// errOwnerGone is the cause of a shutdown because the owner process is gone, also clean.
	errOwnerGone = errors.New("owner process gone")
)

func up(cfg config) error {
	for _, sub := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(cfg.dir, sub), 0o700); err != nil {
			return err
		}
	}
	readyFile := filepath.Join(cfg.dir, "ready")
	_ = os.Remove(readyFile)
	defer os.Remove(readyFile)

	// Everything below stops on a signal or when a component dies; each names the cause.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-signals
		logf("received %v, stopping", s)
		cancel(errInterrupted)
	}()
	if cfg.ownerPID > 0 {
		go watchOwner(cfg.ownerPID, cancel)
		// Registered before stopAll, so it runs after it: nobody else will remove DIR.
		defer func() {
			if errors.Is(context.Cause(ctx), errOwnerGone) {
				_ = os.RemoveAll(cfg.dir)
			}
		}()
	}
	sup := newSupervisor(cfg.dir, cfg.bin)
	defer sup.stopAll(15 * time.Second)
	go func() {
		p := <-sup.died
		cancel(fmt.Errorf("%s exited unexpectedly (%v); last lines of %s:\n%s", p.name, p.err, p.log, p.tail(30)))
	}()

	cluster, err := start(ctx, cfg, sup)
	if err != nil {
		if cause := context.Cause(ctx); cleanStop(cause) {
			return nil
		} else if cause != nil {
			return cause
		}
		return err
	}
	ready := fmt.Sprintf("kubeconfig=%s\nserver=%s\nsupervisor=%d\nbin=%s\nnodes=%d\nkubeconfig2=%s\nserver2=%s\n",
		cluster.kubeconfig, cluster.server, os.Getpid(), cfg.bin, cfg.nodes, cluster.kubeconfig2, cluster.server2)
	if err := writeFileAtomic(readyFile, ready); err != nil {
		return err
	}
	logf("ready: export KUBECONFIG=%s", cluster.kubeconfig)

	// Restarts run here, on the main goroutine, because that is where children must be started.
	restarts := make(chan os.Signal, 1)
	signal.Notify(restarts, syscall.SIGUSR1)
	toggles := make(chan os.Signal, 1)
	signal.Notify(toggles, syscall.SIGUSR2)
	for count := 1; ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-toggles:
			running, err := cluster.toggleSecondAPIServer(ctx, sup)
			if err != nil {
				cancel(fmt.Errorf("stop or start the second kube-apiserver: %w", err))
				continue
			}
			state := "stopped"
			if running {
				state = "running"
			}
			logf("the second kube-apiserver is %s", state)
			if err := writeFileAtomic(filepath.Join(cfg.dir, "apiserver-2"), state+"\n"); err != nil {
				cancel(err)
			}
		case <-restarts:
			logf("received SIGUSR1: restarting kube-apiserver")
			if err := cluster.restartAPIServer(ctx, sup); err != nil {
				cancel(fmt.Errorf("restart kube-apiserver: %w", err))
				continue
			}
			logf("kube-apiserver restarted (%d)", count)
			if err := writeFileAtomic(filepath.Join(cfg.dir, "apiserver-restarts"), fmt.Sprintf("%d\n", count)); err != nil {
				cancel(err)
			}
			count++
		}
	}
	if cause := context.Cause(ctx); !cleanStop(cause) {
		return cause
	}
	return nil
}

// writeFileAtomic writes content to path so that a reader sees either the old or the new file.
func writeFileAtomic(path, content string) error {
	if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func cleanStop(cause error) bool {
	return errors.Is(cause, errInterrupted) || errors.Is(cause, errOwnerGone)
}

// watchOwner cancels with errOwnerGone once process pid no longer exists.
func watchOwner(pid int, cancel context.CancelCauseFunc) {
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			logf("owner process %d is gone, stopping", pid)
			cancel(errOwnerGone)
			return
		}
		time.Sleep(time.Second)
	}
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1. They are released before the
// components bind them; another process could take one in between, which start-up then reports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitFor polls check every interval until it reports true, or ctx ends. The error then names
// what was awaited and the last problem seen.
func waitFor(ctx context.Context, what string, interval time.Duration, check func(context.Context) (bool, error)) error {
	start := time.Now()
	var last error
	for {
		ok, err := check(ctx)
		if ok {
			logf("%s (%.1fs)", what, time.Since(start).Seconds())
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("gave up waiting until %s after %.0fs", what, time.Since(start).Seconds())
			if last != nil {
				msg += ": last error: " + strings.TrimSpace(last.Error())
			}
			return errors.New(msg)
		case <-time.After(interval):
		}
	}
}
