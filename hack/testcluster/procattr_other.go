//go:build !linux

package main

import "syscall"

// childProcAttr: without Pdeathsig, components outlive a supervisor killed by SIGKILL;
// `hack/cluster.sh down` still stops them through the pids file.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
